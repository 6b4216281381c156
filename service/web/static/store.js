// One small store: the app's whole state as one value, changed only by named transitions
// (pure functions: state, payload → new state). Subscribers (the render, and the effects:
// network, storage, timers) are told after each transition that changed something.
//
//   const store = createStore(initial, { 'toast/show': (s, text) => ({ ...s, toast: {text} }) });
//   store.subscribe((state, prev, name) => …);
//   store.dispatch('toast/show', 'hello');
export function createStore(initial, transitions) {
  let state = initial;
  const subs = new Set();
  let depth = 0;
  const queue = [];
  function dispatch(name, payload) {
    const fn = transitions[name];
    if (!fn) throw new Error(`no transition ${name}`);
    queue.push([name, payload]);
    if (depth) return state; // a subscriber dispatched: run after the current round of subscribers
    depth += 1;
    try {
      while (queue.length) {
        const [n, p] = queue.shift();
        const prev = state;
        const next = transitions[n](prev, p);
        if (next === prev || next === undefined) continue;
        state = next;
        for (const s of [...subs]) s(state, prev, n);
      }
    } finally { depth -= 1; }
    return state;
  }
  return {
    get state() { return state; },
    dispatch,
    subscribe(fn) { subs.add(fn); return () => subs.delete(fn); },
  };
}

// a changed copy of a plain value: edit(value, (draft) => { draft.x = 1; }) leaves value as it was
export function edit(value, fn) {
  const draft = structuredClone(value);
  fn(draft);
  return draft;
}
