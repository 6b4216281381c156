// A tiny view layer: h() describes an element (a plain object, no DOM), patch() brings a real
// container in line with a description, touching only what differs. The same element stays in
// place from one render to the next (matched by `key`, else by tag in order), so an input keeps
// its focus, its caret and its scroll position while the screen around it changes.
//
//   h('button', {testid: 'confirm', onclick}, 'OK')   → {tag, props, children, key}
//   patch(document.getElementById('app'), [vnode, …])
//
// Props: `class`, `testid` (data-testid), `key`, `on<event>` (a listener, swapped in place),
// the DOM properties in PROPS (set as properties, compared with the live value), anything else
// as an attribute (true → '', false/null → absent). Children: vnodes, strings, numbers, arrays
// (flattened), null/false (skipped).
const PROPS = new Set(['value', 'checked', 'disabled', 'hidden', 'selected', 'open', 'readOnly']);
const SVG_NS = 'http://www.w3.org/2000/svg';

export function h(tag, props, ...children) {
  const p = props || {};
  return { tag, props: p, key: p.key ?? null, children: flat(children) };
}

function flat(list, out = []) {
  for (const c of list) {
    if (c == null || c === false || c === true) continue;
    if (Array.isArray(c)) flat(c, out);
    else out.push(typeof c === 'object' ? c : String(c));
  }
  return out;
}

// the text a vnode tree shows (for tests and for plain-text exports)
export function textOf(v) {
  if (v == null) return '';
  if (typeof v === 'string') return v;
  return v.children.map(textOf).join('');
}

const sameKind = (node, v) => (typeof v === 'string'
  ? node.nodeType === 3
  : node.nodeType === 1 && node.__tag === v.tag && (node.__key ?? null) === v.key);

function create(v, svg) {
  if (typeof v === 'string') return document.createTextNode(v);
  const inSvg = svg || v.tag === 'svg';
  const el = inSvg ? document.createElementNS(SVG_NS, v.tag) : document.createElement(v.tag);
  el.__tag = v.tag;
  el.__key = v.key;
  update(el, v, inSvg);
  return el;
}

function update(el, v, svg) {
  const old = el.__props || {};
  const props = v.props;
  const handlers = el.__on || (el.__on = {});
  for (const k of Object.keys(old)) {
    if (!(k in props) || props[k] == null || props[k] === false) unset(el, k, handlers);
  }
  for (const [k, val] of Object.entries(props)) {
    if (k === 'key' || val == null || val === false) continue;
    if (k.startsWith('on') && typeof val === 'function') {
      const type = k.slice(2);
      if (!handlers[type]) el.addEventListener(type, (e) => { const f = el.__on[type]; if (f) f(e); });
      handlers[type] = val;
    } else if (k === 'class') {
      if (svg) { if (el.getAttribute('class') !== val) el.setAttribute('class', val); } else if (el.className !== val) el.className = val;
    } else if (k === 'testid') {
      if (el.dataset.testid !== val) el.dataset.testid = val;
    } else if (PROPS.has(k) && !svg) {
      if (el[k] !== val) el[k] = val;
    } else {
      const s = val === true ? '' : String(val);
      if (el.getAttribute(k) !== s) el.setAttribute(k, s);
    }
  }
  el.__props = props;
  patchChildren(el, v.children, svg && v.tag !== 'foreignObject');
}

function unset(el, k, handlers) {
  if (k.startsWith('on') && handlers[k.slice(2)]) handlers[k.slice(2)] = null;
  else if (k === 'class') el.removeAttribute('class');
  else if (k === 'testid') delete el.dataset.testid;
  else if (PROPS.has(k) && k in el) { if (el[k]) el[k] = k === 'value' ? '' : false; } else el.removeAttribute(k);
}

// Match each new child with an old node: a keyed one by key; an unkeyed one with the next old
// unkeyed node of the same tag (skipping, and so dropping, the ones in between). Nodes that stay
// are never moved unless the order of keyed children changed: a focused input is not disturbed.
export function patchChildren(parent, vchildren, svg = false) {
  const old = Array.from(parent.childNodes);
  const keyed = new Map();
  const loose = [];
  for (const n of old) {
    if (n.__key != null) keyed.set(n.__key, n);
    else loose.push(n);
  }
  let li = 0;
  const used = new Set();
  const nodes = vchildren.map((v) => {
    let match = null;
    if (typeof v !== 'string' && v.key != null) {
      const n = keyed.get(v.key);
      if (n && sameKind(n, v) && !used.has(n)) match = n;
    } else {
      for (let j = li; j < loose.length; j += 1) {
        if (sameKind(loose[j], v)) { match = loose[j]; li = j + 1; break; }
      }
    }
    if (match) {
      used.add(match);
      if (typeof v === 'string') { if (match.data !== v) match.data = v; } else update(match, v, svg || v.tag === 'svg');
      return match;
    }
    return create(v, svg);
  });
  for (const n of old) if (!used.has(n)) n.remove();
  for (let i = 0; i < nodes.length; i += 1) {
    const at = parent.childNodes[i];
    if (at !== nodes[i]) parent.insertBefore(nodes[i], at || null);
  }
}

export function patch(container, vnodes) {
  patchChildren(container, flat([vnodes]), container instanceof SVGElement);
}

// a labelled control: <label for=id>text</label><control id=id> (the id follows the testid, so
// that it stays the same from one render to the next)
export function field(label, control, hint) {
  const id = control.props.id || (control.props.id = `f-${control.props.testid || slug(label)}`);
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('small', {}, hint) : null);
}

const slug = (s) => String(s).replace(/[^A-Za-z0-9]+/g, '-').slice(0, 24) || 'x';
