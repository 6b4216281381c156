// The end of the evening (filled in below).
import { h } from './dom.js';
export function renderEnd(s, A, top) { return [top, h('main', { class: 'page', key: 'end' }, '…')]; }
export function endActions() { return { loadSummary() {} }; }
