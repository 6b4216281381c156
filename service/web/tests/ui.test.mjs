// The screens drawn from the state (pure: vnodes), as a player reads them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import './setup.mjs';
import { setLang } from '../static/i18n.js';
import { textOf, h } from '../static/dom.js';
import { statusParts } from '../static/ui.js';

const A = { openDialog() {} };
const state = (more = {}) => ({ online: true, pending: [], liveMode: 'stream', table: { id: 't', token: 'k' }, mySeat: 1,
  view: { version: 42, players: ['东', '南', '西', '北'] }, ...more });
const words = (s) => textOf(h('div', {}, statusParts(s, A)));

test('the status line in a player’s words: no version, no kind of connection while it is live', () => {
  setLang('zh');
  assert.equal(words(state()), '在线待发送 0我：南');
  setLang('en');
  assert.equal(words(state()), 'onlinepending 0Me: 南');
  for (const lang of ['zh', 'en']) {
    setLang(lang);
    for (const liveMode of ['connecting', 'stream', 'poll', 'stopped']) {
      for (const online of [null, true, false]) {
        const text = words(state({ liveMode, online }));
        assert.doesNotMatch(text, /v\s*42|\b42\b|实时|轮询|\blive\b|poll|stream|SSE/i, `${lang} ${liveMode} ${online}: ${text}`);
      }
    }
  }
  setLang('zh');
  assert.ok(words(state({ liveMode: 'poll' })).includes('更新会慢几秒'));
  assert.ok(words(state({ liveMode: 'stopped', online: false })).includes('不再更新'));
});
