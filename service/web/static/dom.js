// h('button', {testid: 'confirm', onclick}, 'OK'): a tiny element builder.
const PROPS = new Set(['value', 'checked', 'disabled', 'hidden', 'selected', 'open', 'readOnly']);

export function h(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'testid') e.dataset.testid = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (PROPS.has(k)) e[k] = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c != null && c !== false) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

let seq = 0;
export const uid = (p = 'f') => `${p}${++seq}`;

// a labelled control: <label for=id>text</label><control id=id>
export function field(label, control, hint) {
  const id = control.id || (control.id = uid());
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('small', {}, hint) : null);
}
