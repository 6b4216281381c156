// The correction sheet's effects (its logic: mend.js; its drawing: mending.js). The round is read as
// the service explains it (GET …/rounds/{n}); what the new list of entries would pay is asked of the
// service without writing anything (POST /v1/rounds/settle, the stateless settlement); confirming writes
// one correction (PUT …/rounds/{n}/events) with If-Match (the table's version when the round was read)
// and an Idempotency-Key. A refusal (409 correction_conflict, 412, 422, no network…) is said on the sheet,
// which stays open with every entry as it was; after a 412 the round is read again ("before" as it now
// stands) and the entries are kept, so that confirming again applies them to the table as it is now.
//
// An entry is inserted or entered again on the very sheet that records a new one (dialogs.js): that sheet
// is opened with `dialog.mend` = {form: the correction sheet's form, at, replace, id}; its A.record(body)
// comes here (put) instead of being sent, and its cancel comes back (back).
import { call, tablePath, uuid4 } from './api.js';
import { t } from './i18n.js';
import { mendForm, rebase, putEntry, settleBody, afterKey, afterOf, putBody, mendCtx } from './mend.js';
import { edit } from './store.js';

// S: the state; dispatch; dialogs: the sheets (DIALOGS); errorText(e): a refusal in words;
// nextId(): a new dialog id; written(data, number): a correction landed (the table follows it)
export function mendActions({ S, dispatch, dialogs, errorText, nextId, written }) {
  let asking = null; // the entries whose payments are being asked for (afterKey)

  // a refusal on the correction sheet, in words: the later round that would break, the entry that cannot happen
  function words(e) {
    const p = (e && e.problem) || {};
    if (e && e.code === 'correction_conflict') return t('mend_conflict', { round: p.round ?? '?' });
    const text = errorText(e);
    return e && e.status === 422 && Number.isInteger(p.event) ? `${t('mend_entry_n', { n: p.event + 1 })}${text}` : text;
  }

  const set = (id, fn) => dispatch('dialog/set', { id, fn });

  async function load(id, number, apply) {
    const s = S();
    const version = s.view.version; // (read before the round: an If-Match no newer than what is shown)
    try {
      const res = await call('GET', tablePath(s.table.id, `/rounds/${number}`), { token: s.table.token || s.table.read });
      set(id, (x) => apply(x, res.data, version));
      return true;
    } catch (e) {
      set(id, (x) => { x.loadError = words(e); });
      return false;
    }
  }

  const fx = {
    // the correction sheet of round `number`
    open(number) {
      const s = S();
      if (!s.view || !s.table || !s.table.token) return;
      const id = nextId();
      dispatch('dialog/open', { kind: 'mend', form: { number, loading: true }, id });
      load(id, number, (x, round, version) => Object.assign(x, mendForm(round, version), { loading: false, loadError: null }));
    },

    // the recording sheet of `kind` for the entry at `at` (replace: entered again in its place)
    sheet(kind, at, replace) {
      const s = S();
      const d = s.dialog;
      if (!d || d.kind !== 'mend' || !dialogs[kind]) return;
      const f = d.form;
      const ctx = mendCtx(s.view, s.mySeat, f, at);
      const def = dialogs[kind];
      const form = replace && def.edit ? def.edit(f.entries[at].event, ctx) : def.form(ctx);
      dispatch('dialog/open', { kind, form, id: nextId(), mend: { form: f, at, replace, id: d.id } });
    },

    // the entry that recording sheet made: into the list, and back to the correction sheet
    put(body) {
      const m = S().dialog.mend;
      dispatch('dialog/open', { kind: 'mend', form: edit(m.form, (x) => putEntry(x, m.at, body, m.replace)), id: m.id });
      return undefined;
    },
    back() {
      const m = S().dialog.mend;
      dispatch('dialog/open', { kind: 'mend', form: m.form, id: m.id });
    },

    // confirm: one PUT; true when written, else the refusal in words (the sheet stays open)
    async save() {
      const s = S();
      const d = s.dialog;
      const f = d.form;
      const body = putBody(f);
      const text = JSON.stringify(body);
      let key = f.key && f.keyBody === text ? f.key : null;
      if (!key) { key = uuid4(); set(d.id, (x) => { x.key = key; x.keyBody = text; }); }
      try {
        const res = await call('PUT', tablePath(s.table.id, `/rounds/${f.number}/events`), { body, token: s.table.token,
          headers: { 'If-Match': `"${f.version}"`, 'Idempotency-Key': key } });
        written(res.data, f.number);
        return true;
      } catch (e) {
        if (e.status === 412 || e.code === 'version_mismatch') {
          const version = e.problem && Number.isInteger(e.problem.version) ? e.problem.version : null;
          await load(d.id, f.number, (x, round, seen) => Object.assign(x, rebase(x, round, version ?? seen)));
          return t('mend_stale');
        }
        return words(e);
      }
    },

    // what the entries would pay, whenever they change while the sheet is open
    effects(s) {
      const d = s.dialog;
      if (!d || d.kind !== 'mend' || !d.form.entries || !s.view) return;
      const f = d.form;
      const key = afterKey(f);
      if ((f.after && f.after.for === key) || f.afterFor === key || asking === key) return;
      asking = key;
      call('POST', '/v1/rounds/settle', { body: settleBody(f, s.view.ruleset) }).then((res) => {
        set(d.id, (x) => { if (afterKey(x) === key) Object.assign(x, { after: afterOf(res.data, x), afterError: null, afterFor: key }); });
      }, (e) => {
        set(d.id, (x) => { if (afterKey(x) === key) Object.assign(x, { after: null, afterError: words(e), afterFor: key }); });
      }).finally(() => { if (asking === key) asking = null; });
    },
  };
  return fx;
}
