// 中文 / English. t(key, {vars}) fills {name} placeholders; the choice is kept on the phone.

const STRINGS = {
  zh: {
    app: '四川麻将记分', lang_switch: 'English', lang_label: '切换到英文',
    start_title: '开一桌', room: '玩法', players: '玩家', player_n: '玩家 {n}',
    wind: ['东', '南', '西', '北'], options: '规则选项', cap: '封顶（番）', cap_none: '不封顶',
    zimo: '自摸', zimo_none: '不加', zimo_base: '自摸加底', zimo_fan: '自摸加番',
    dianganghua: '点杠花', dgh_self_draw: '算自摸', dgh_discard: '算点炮',
    haidi: '海底', jingoudiao: '金钩钓', menqing: '门清', zhongzhang: '中张',
    jiaxinwu: '夹心五', kaertiao: '卡二条', yitiaolong: '一条龙',
    stakes: '游戏币', stakes_on: '打游戏币（每局结算）', coin_per_point: '每分多少游戏币', fee: '每局台费（每人交）',
    bankroll: '游戏币', coins: '游戏币', buy_in: '买入游戏币', who_buys: '谁买入', buy_coins: '买多少游戏币',
    ev_buy_in: '{seat} 买入 {coins} 游戏币', coins_round: '本局游戏币', coins_bad: '游戏币要填正整数。',
    create: '开桌', creating: '正在开桌…', api_key: 'API 密钥', api_key_hint: '只有服务要求时才填（保存在本机）。', recent: '最近的桌子', open: '打开',
    presets: { xuezhan: '血战到底', normal: '普通场', 'chengdu-points': '成都计番', xueliu: '血流成河', 'sanren-liangfang': '三人两房' },
    share: '邀请其他手机', share_write: '记分链接（可记分）', share_read: '旁观链接（只读）',
    share_hint: '扫码或打开链接即可加入本桌。记分链接可以改动本桌，只发给同桌的人。',
    show_qr: '显示二维码', qr_alt: '记分链接的二维码', qr_local: '这是本机地址（127.0.0.1），别的手机打不开：用局域网地址启动服务。',
    online: '在线', offline: '离线', pending: '待发送', version: '版本', read_only: '只读',
    dealer: '庄', won: '已胡', left: '已走', balance: '积分', round_n: '第 {n} 局', no_round: '还没开局',
    round_ended: '本局结束', this_round: '本局',
    round_start: '开始新局', peng: '碰', kong: '杠', hu: '胡', draw: '流局', escape: '逃跑',
    undo: '撤销', end_round: '结束本局', confirm: '确定', cancel: '取消', next: '下一步', close: '关闭',
    who: '谁', who_peng: '谁碰', who_kong: '谁杠', from_whom: '谁打的', discarder: '谁点炮',
    tile: '哪张牌', kind: '哪种杠', kind_direct: '明杠（点杠）', kind_added: '补杠（巴杠）', kind_concealed: '暗杠',
    self_drawn: '自摸', winners: '谁胡（可多人）', winner: '谁胡', win_tile: '胡哪张',
    after_kong_self: '杠上花', after_kong_discard: '杠上炮', robbing_kong: '抢杠胡', last_tile: '海底',
    heavenly: '天胡', earthly: '地胡', flags: '特殊',
    fan_for: '{name} 的番', fan: '番数', by_fan: '番数', by_patterns: '番型', by_hand: '手牌',
    fan_total: '共 {fan} 番', hand_tiles: '手牌（{n}/{size} 张）', melds: '碰/杠', add_meld: '加一组',
    meld_peng: '碰', meld_direct: '明杠', meld_added: '补杠', meld_concealed: '暗杠',
    remove_last: '删最后一张', clear: '清空', remove: '删除', scoring: '正在算番…',
    points_n: '{points} 分', capped: '封顶', void_suit: '定缺', void_none: '不定缺',
    dealer_q: '谁坐庄', voids_opt: '定缺（可不填）',
    draw_for: '{name}：听牌了吗？', st_ting: '听牌（番数）', st_hand: '听牌（手牌）', st_not_ting: '没听', st_huazhu: '花猪',
    dajiao_fan: '大叫番数', ting_waits: '听 {tiles}，大叫 {fan} 番', not_ting: '没听牌',
    who_escapes: '谁逃跑', last_four: '牌墙只剩四张以内', undo_q: '撤销这一条？', end_round_q: '现在结束本局？（已付的都算）',
    history: '记录', rounds: '各局', totals: '合计', no_events: '还没有记录',
    pending_list: '待发送（网络恢复后自动发送）',
    sent: '已记录', queued: '没有网络：已排队，恢复后自动发送',
    missing: '还没选：{what}',
    ev_round_start: '第 {n} 局开始，{dealer} 坐庄', ev_round_end: '结束本局',
    ev_peng: '{seat} 碰 {tile}（{from} 打的）', ev_kong_direct: '{seat} 明杠 {tile}（{from} 点杠）',
    ev_kong_added: '{seat} 补杠 {tile}', ev_kong_concealed: '{seat} 暗杠 {tile}',
    ev_hu_self: '{winners} 自摸 {tile}', ev_hu_discard: '{winners} 胡 {tile}（{from} 点炮）',
    ev_draw: '流局', ev_escape: '{seat} 逃跑', ev_void: '撤销了 #{target}', and: '、',
    pays: '{from} 付给 {to} {points} 分', nothing_paid: '没有付分', fan_n: '{fan}番', times: '×{n}',
    reasons: {
      dianpao: '点炮', zimo: '自摸', kong_direct: '明杠', kong_added: '补杠', kong_concealed: '暗杠',
      kong_void: '抢杠退回杠钱', transfer: '呼叫转移', refund: '退税', huazhu: '查花猪', dajiao: '查大叫',
      escape: '逃跑', forfeit: '退回所得',
    },
    suits: { m: '万', p: '筒', s: '条' },
    err: {
      offline: '连不上服务器。', stale: '别的手机先改了这桌，这条没有记上。看一下记录，需要的话再记一次。',
      conflict: '这一步和本桌现在的状态冲突，没有改动：', rule: '规则不允许，没有记上：',
      read_only: '旁观链接只能看，不能记分。', auth: '链接不对或已失效。', gone: '这张桌子不存在了。',
      busy: '服务器忙，稍后自动重试。', bad: '输入有误：', void_conflict: '不能撤销：后面的记录依赖它。',
      already_voided: '已经撤销过了。', nothing_to_undo: '没有可撤销的记录。',
      create_failed: '开桌失败：', names: '请填写每位玩家的名字。', api_key: '这个服务需要 API 密钥：在开桌页的“规则选项”里填写。',
    },
    codes: {
      seat_not_in_round: '这位玩家已经胡了或走了。', self_discard: '自己不能点自己的炮/杠。',
      not_a_win: '这手牌胡不了。', too_many_copies: '同一张牌超过四张了。', round_ended: '本局已经结束了。',
      no_round: '先开始一局。', round_in_progress: '本局还没结束。', kong_required: '前一步必须是对应的杠。',
      contradictory_flags: '这些特殊情况不能同时成立。', win_tile_not_in_hand: '胡的那张牌不在手牌里。',
      duplicate_winner: '同一个人不能胡两次。', self_draw_one_winner: '自摸只能一个人胡。',
      no_peng: '补杠之前要先有碰。', bad_seats: '流局要列出每位还在打的玩家。', bad_hand: '手牌张数或写法不对。',
      no_stakes: '这桌不打游戏币。', too_many_coins: '游戏币太多了。', bad_stakes: '游戏币设置不对（要填整数）。',
      bad_players: '人数和玩法不符。',
    },
  },
  en: {
    app: 'Sichuan mahjong scores', lang_switch: '中文', lang_label: 'Switch to Chinese',
    start_title: 'Start a table', room: 'Room', players: 'Players', player_n: 'Player {n}',
    wind: ['East', 'South', 'West', 'North'], options: 'Rule options', cap: 'Cap (fan)', cap_none: 'no cap',
    zimo: 'Self-drawn', zimo_none: 'nothing extra', zimo_base: '+1 unit (自摸加底)', zimo_fan: '+1 fan (自摸加番)',
    dianganghua: 'Win on a fed kong (点杠花)', dgh_self_draw: 'as self-drawn', dgh_discard: 'as a discard win',
    haidi: 'Last tile (海底)', jingoudiao: 'Golden hook (金钩钓)', menqing: 'Concealed hand (门清)', zhongzhang: 'All simples (中张)',
    jiaxinwu: '5 in the middle (夹心五)', kaertiao: 'Closed 2 bamboo (卡二条)', yitiaolong: 'Straight (一条龙)',
    stakes: 'Coins', stakes_on: 'Play for coins (settled every round)', coin_per_point: 'Coins per point', fee: 'Fee per round (each seat, to the house)',
    bankroll: 'coins', coins: 'coins', buy_in: 'Buy in', who_buys: 'Who buys in', buy_coins: 'How many coins',
    ev_buy_in: '{seat} buys in {coins} coins', coins_round: 'coins this round', coins_bad: 'Coins are a whole number above 0.',
    create: 'Create table', creating: 'Creating…', api_key: 'API key', api_key_hint: 'Only if this service asks for one (kept on this phone).', recent: 'Recent tables', open: 'Open',
    presets: { xuezhan: 'Bloody battle (血战到底)', normal: 'Normal (普通场)', 'chengdu-points': 'Chengdu points (成都计番)', xueliu: 'Bloody river (血流成河)', 'sanren-liangfang': 'Three players (三人两房)' },
    share: 'Invite the other phones', share_write: 'Scoring link (can record)', share_read: 'Onlooker link (read-only)',
    share_hint: 'Scan or open the link to join this table. The scoring link can change the table: give it only to the players.',
    show_qr: 'Show QR code', qr_alt: 'QR code of the scoring link', qr_local: 'This is a loopback address (127.0.0.1): other phones cannot open it. Start the service on the LAN address.',
    online: 'online', offline: 'offline', pending: 'pending', version: 'version', read_only: 'read-only',
    dealer: 'dealer', won: 'won', left: 'left', balance: 'points', round_n: 'Round {n}', no_round: 'No round yet',
    round_ended: 'round over', this_round: 'this round',
    round_start: 'New round', peng: 'Peng', kong: 'Kong', hu: 'Hu (win)', draw: 'Draw', escape: 'Escape',
    undo: 'Undo', end_round: 'End round', confirm: 'Confirm', cancel: 'Cancel', next: 'Next', close: 'Close',
    who: 'Who', who_peng: 'Who pengs', who_kong: 'Who kongs', from_whom: 'Discarded by', discarder: 'Who discarded',
    tile: 'Which tile', kind: 'Kind of kong', kind_direct: 'Direct (from a discard)', kind_added: 'Added (to a peng)', kind_concealed: 'Concealed',
    self_drawn: 'Self-drawn', winners: 'Winners (one or more)', winner: 'Winner', win_tile: 'Winning tile',
    after_kong_self: 'On a kong replacement (杠上花)', after_kong_discard: 'Discard after a kong (杠上炮)', robbing_kong: 'Robbing a kong (抢杠)', last_tile: 'Last tile (海底)',
    heavenly: 'Heavenly (天胡)', earthly: 'Earthly (地胡)', flags: 'Special',
    fan_for: 'Fan of {name}', fan: 'Fan', by_fan: 'Fan', by_patterns: 'Patterns', by_hand: 'Hand',
    fan_total: '{fan} fan in all', hand_tiles: 'Hand ({n}/{size} tiles)', melds: 'Melds', add_meld: 'Add meld',
    meld_peng: 'Peng', meld_direct: 'Direct kong', meld_added: 'Added kong', meld_concealed: 'Concealed kong',
    remove_last: 'Remove last', clear: 'Clear', remove: 'Remove', scoring: 'Scoring…',
    points_n: '{points} points', capped: 'capped', void_suit: 'Void suit', void_none: 'none',
    dealer_q: 'Dealer', voids_opt: 'Void suits (定缺, optional)',
    draw_for: '{name}: ready (ting)?', st_ting: 'Ting (fan)', st_hand: 'Ting (hand)', st_not_ting: 'Not ting', st_huazhu: 'Flower pig (花猪)',
    dajiao_fan: 'Best wait (大叫) fan', ting_waits: 'Waits {tiles}, best {fan} fan', not_ting: 'Not ting',
    who_escapes: 'Who leaves', last_four: 'Four tiles or fewer left in the wall', undo_q: 'Undo this record?', end_round_q: 'End this round now? (payments so far stand)',
    history: 'History', rounds: 'Rounds', totals: 'Totals', no_events: 'Nothing recorded yet',
    pending_list: 'Pending (sent when the network is back)',
    sent: 'Recorded', queued: 'No network: queued, sent when it is back',
    missing: 'Still to choose: {what}',
    ev_round_start: 'Round {n} starts, {dealer} deals', ev_round_end: 'Round ended',
    ev_peng: '{seat} pengs {tile} (from {from})', ev_kong_direct: '{seat} kongs {tile} (fed by {from})',
    ev_kong_added: '{seat} adds a kong of {tile}', ev_kong_concealed: '{seat} kongs {tile} concealed',
    ev_hu_self: '{winners} self-drawn on {tile}', ev_hu_discard: '{winners} win on {tile} (from {from})',
    ev_draw: 'Draw (wall exhausted)', ev_escape: '{seat} escapes', ev_void: 'Undid #{target}', and: ' & ',
    pays: '{from} pays {to} {points}', nothing_paid: 'nothing paid', fan_n: '{fan} fan', times: '×{n}',
    reasons: {
      dianpao: 'discard win (点炮)', zimo: 'self-drawn (自摸)', kong_direct: 'direct kong', kong_added: 'added kong',
      kong_concealed: 'concealed kong', kong_void: 'robbed kong returned', transfer: 'kong money passed on (呼叫转移)',
      refund: 'kong refund (退税)', huazhu: 'flower pig (花猪)', dajiao: 'not ready (查大叫)', escape: 'escape',
      forfeit: 'winnings returned',
    },
    suits: { m: ' Characters', p: ' Dots', s: ' Bamboo' },
    err: {
      offline: 'Cannot reach the server.', stale: 'Another phone changed the table first: this was not recorded. Check the history and record it again if needed.',
      conflict: 'This conflicts with the table as it stands; nothing changed: ', rule: 'The rules refuse this; nothing was recorded: ',
      read_only: 'The onlooker link can only watch, not record.', auth: 'The link is wrong or no longer valid.', gone: 'This table no longer exists.',
      busy: 'The server is busy; retrying shortly.', bad: 'Invalid input: ', void_conflict: 'Cannot undo: a later record depends on it.',
      already_voided: 'Already undone.', nothing_to_undo: 'Nothing to undo.',
      create_failed: 'Could not create the table: ', names: 'Enter every player\u2019s name.', api_key: 'This service needs an API key: enter it under “Rule options” on the start page.',
    },
    codes: {
      seat_not_in_round: 'That player has already won or left.', self_discard: 'A player cannot feed themself.',
      not_a_win: 'That hand does not win.', too_many_copies: 'More than four copies of a tile.', round_ended: 'The round has ended.',
      no_round: 'Start a round first.', round_in_progress: 'The round is still being played.', kong_required: 'The record just before must be the matching kong.',
      contradictory_flags: 'Those special flags cannot all hold.', win_tile_not_in_hand: 'The winning tile is not in the hand.',
      duplicate_winner: 'The same player cannot win twice on it.', self_draw_one_winner: 'A self-drawn win has one winner.',
      no_peng: 'An added kong needs the peng first.', bad_seats: 'A draw lists every player still in the round.', bad_hand: 'Wrong number of tiles, or bad notation.',
      no_stakes: 'This table does not play for coins.', too_many_coins: 'Too many coins.', bad_stakes: 'The coin settings are wrong (whole numbers only).',
      bad_players: 'The number of players does not fit the room.',
    },
  },
};

const KEY = 'mj.lang';
let lang = (() => {
  try { const v = localStorage.getItem(KEY); if (v === 'zh' || v === 'en') return v; } catch { /* private mode */ }
  return (navigator.language || '').toLowerCase().startsWith('zh') ? 'zh' : 'en';
})();

export const getLang = () => lang;

export function setLang(value) {
  lang = value === 'zh' ? 'zh' : 'en';
  try { localStorage.setItem(KEY, lang); } catch { /* ignore */ }
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  document.title = t('app');
}

export function t(key, vars) {
  let v = STRINGS[lang];
  for (const part of key.split('.')) v = v == null ? undefined : v[part];
  if (v === undefined) {
    v = STRINGS.en;
    for (const part of key.split('.')) v = v == null ? undefined : v[part];
  }
  if (typeof v !== 'string') return v === undefined ? key : v;
  return vars ? v.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m)) : v;
}
