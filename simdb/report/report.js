(function(){
"use strict";
var DATA = JSON.parse(document.getElementById("simdb-data").textContent);
var ALL = DATA.clusters;
var TRUNC = 600, CTX = 120, MAXSHOW = 1500, MEMBERS_SHOWN = 20, DATA_LIMIT = DATA.max_text_chars || 20000;
var state = {page: 0, size: 50, list: ALL, query: ""};
var $ = function(id){return document.getElementById(id);};
function el(tag, cls, text){
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function fmt(n){return Number(n).toLocaleString("en-US");}
/* The segments of one side (1 = representative, 2 = member) as [tag, text]:
   tag 3 (same words, other whitespace) becomes unmarked text of that side. */
function sideOf(segs, side){
  var out = [];
  for (var i = 0; i < segs.length; i++){
    var g = segs[i];
    if (g[0] === 0 || g[0] === side) out.push(g);
    else if (g[0] === 3) out.push([0, g[side]]);
  }
  return out;
}
function textOf(segs, side){
  var s = "", mine = sideOf(segs, side);
  for (var i = 0; i < mine.length; i++) s += mine[i][1];
  return s;
}
/* Append the segments of one side (1 = representative, 2 = member) to box,
   marking changed words. Compact mode keeps every change visible but shortens
   long unchanged stretches to CTX characters of context around the changes,
   and stops after about MAXSHOW characters. Returns true when something was elided. */
function elided(n){ return el("span", "na gap", " [\u2026 " + fmt(n) + " characters \u2026] "); }
function renderSegs(box, segs, side, compact){
  var used = 0, cut = false, mine = sideOf(segs, side);
  for (var i = 0; i < mine.length; i++){
    var tag = mine[i][0], t = mine[i][1];
    if (compact && used >= MAXSHOW){
      var rest = 0; for (var j = i; j < mine.length; j++) rest += mine[j][1].length;
      box.appendChild(elided(rest)); return true;
    }
    if (tag === 0){
      if (compact && t.length > 2 * CTX + 40){
        var first = i === 0, last = i === mine.length - 1;
        if (first && last){ box.appendChild(document.createTextNode(t.slice(0, TRUNC)));
          if (t.length > TRUNC){ box.appendChild(elided(t.length - TRUNC)); cut = true; } used += TRUNC; continue; }
        if (!first) box.appendChild(document.createTextNode(t.slice(0, CTX)));
        box.appendChild(elided(t.length - (first || last ? CTX : 2 * CTX)));
        if (!last) box.appendChild(document.createTextNode(t.slice(t.length - CTX)));
        used += first || last ? CTX : 2 * CTX; cut = true; continue;
      }
      box.appendChild(document.createTextNode(t));
    } else {
      var m = el(side === 1 ? "del" : "ins", "chg", compact && t.length > TRUNC ? t.slice(0, TRUNC) : t);
      m.title = side === 1 ? "only in the representative" : "only in this member";
      box.appendChild(m);
      if (compact && t.length > TRUNC){ box.appendChild(elided(t.length - TRUNC)); cut = true; }
    }
    used += Math.min(t.length, TRUNC);
  }
  return cut;
}
function renderPlain(box, text, limit, why){
  if (text === null || text === undefined){
    box.appendChild(el("span", "na", why ? "(text not available: " + why + ")" : "(text not available)")); return false; }
  if (limit && text.length > limit){ box.appendChild(document.createTextNode(text.slice(0, limit)));
    box.appendChild(elided(text.length - limit)); return true; }
  box.appendChild(document.createTextNode(text)); return false;
}
function column(label, key, cutTotal){
  var col = el("div", "col");
  var lab = el("div", "label");
  lab.appendChild(document.createTextNode(label + " "));
  lab.appendChild(el("span", "key", key));
  col.appendChild(lab);
  var pre = el("div", "text");
  col.appendChild(pre);
  if (cutTotal) col.appendChild(el("div", "note", "(cut to " + fmt(DATA_LIMIT) + " of " + fmt(cutTotal) + " characters in this file)"));
  return {col: col, box: pre};
}
function pairView(c, m){
  var pair = el("div", "pair");
  var head = el("div", "pairhead");
  var mk = el("span"); mk.appendChild(document.createTextNode("member ")); mk.appendChild(el("span", "key", m.k));
  head.appendChild(mk);
  var hasJ = m.j !== undefined && m.j !== null;
  if (m.d !== null && m.d !== undefined){
    var d = el("span", "metric dist"); d.appendChild(document.createTextNode("distance "));
    d.appendChild(el("b", null, m.d)); d.appendChild(document.createTextNode(" / 64"));
    if (!hasJ){  // a Hamming answer: its similarity is 1 - distance/64, not the rule's Jaccard
      d.appendChild(document.createTextNode(" \u00b7 Hamming similarity "));
      d.appendChild(el("b", null, (1 - m.d / 64).toFixed(3)));
    }
    head.appendChild(d);
  }
  if (hasJ){
    var j = el("span", "metric jac"); j.appendChild(document.createTextNode("Jaccard "));
    j.appendChild(el("b", null, Number(m.j).toFixed(3))); head.appendChild(j);
  }
  pair.appendChild(head);
  if (m.same){
    head.appendChild(el("span", "same", "identical text"));
    return pair;
  }
  if (m.rule_same) head.appendChild(el("span", "same", "the same text to the rule (only case, punctuation or spacing differ)"));
  if (m.omit){
    pair.appendChild(el("div", "na", "(text left out of this report: only the first members of a large cluster carry their texts)"));
    return pair;
  }
  var cols = el("div", "cols");
  var left = column("representative", c.r.k, c.r.cut), right = column("member", m.k, m.cut);
  cols.appendChild(left.col); cols.appendChild(right.col);
  pair.appendChild(cols);
  function fill(limit){
    left.box.textContent = ""; right.box.textContent = "";
    var a, b;
    if (m.s){ a = renderSegs(left.box, m.s, 1, !!limit); b = renderSegs(right.box, m.s, 2, !!limit); }
    else { a = renderPlain(left.box, c.r.t, limit, c.r.why); b = renderPlain(right.box, m.t, limit, m.why); }
    return a || b;
  }
  if (fill(TRUNC)){
    var total = m.s ? Math.max(textOf(m.s, 1).length, textOf(m.s, 2).length)
                    : Math.max((c.r.t || "").length, (m.t || "").length);
    var btn = el("button", "more expand", "Show full text (" + fmt(total) + " characters)");
    btn.type = "button";
    btn.addEventListener("click", function(){
      var full = btn.getAttribute("data-full") === "1";
      fill(full ? TRUNC : 0);
      btn.setAttribute("data-full", full ? "0" : "1");
      btn.textContent = full ? "Show full text (" + fmt(total) + " characters)" : "Show less";
    });
    pair.appendChild(btn);
  }
  return pair;
}
function clusterView(c, index){
  var sec = el("section", "cluster");
  sec.setAttribute("data-rep", c.r.k);
  var h = el("h2");
  h.appendChild(el("span", "num", "#" + fmt(index + 1)));
  h.appendChild(el("span", "badge", fmt(c.n) + " texts"));
  var rk = el("span"); rk.appendChild(document.createTextNode("representative "));
  rk.appendChild(el("span", "key rep", c.r.k)); h.appendChild(rk);
  sec.appendChild(h);
  var body = el("div", "pairs");
  sec.appendChild(body);
  function show(n){
    body.textContent = "";
    for (var i = 0; i < Math.min(n, c.m.length); i++) body.appendChild(pairView(c, c.m[i]));
    if (c.m.length > n){
      var btn = el("button", "more members", "Show all " + fmt(c.m.length) + " members");
      btn.type = "button";
      btn.addEventListener("click", function(){ show(c.m.length); });
      body.appendChild(btn);
    }
  }
  if (!c.m.length) body.appendChild(el("div", "pair na", "(no other members)"));
  else show(MEMBERS_SHOWN);
  return sec;
}
function render(){
  var list = state.list, pages = Math.max(1, Math.ceil(list.length / state.size));
  if (state.page >= pages) state.page = pages - 1;
  if (state.page < 0) state.page = 0;
  var start = state.page * state.size, end = Math.min(list.length, start + state.size);
  var main = $("clusters");
  main.textContent = "";
  var frag = document.createDocumentFragment();
  for (var i = start; i < end; i++) frag.appendChild(clusterView(list[i], list[i]._i));
  main.appendChild(frag);
  if (!list.length) main.appendChild(el("p", "na", state.query ? "No cluster matches the filter." : "No clusters."));
  var msg = list.length ? "Clusters " + fmt(start + 1) + "\u2013" + fmt(end) + " of " + fmt(list.length) : "0 clusters";
  if (state.query) msg += " matching (of " + fmt(ALL.length) + ")";
  $("status").textContent = msg;
  $("status").setAttribute("data-count", String(list.length));
  $("status").setAttribute("data-query", state.query);
  var pl = "page " + fmt(state.page + 1) + " / " + fmt(pages);
  ["pageinfo", "pageinfo2"].forEach(function(id){ $(id).textContent = pl; });
  ["prev", "prev2"].forEach(function(id){ $(id).disabled = state.page === 0; });
  ["next", "next2"].forEach(function(id){ $(id).disabled = state.page >= pages - 1; });
}
for (var i = 0; i < ALL.length; i++) ALL[i]._i = i;
function hay(c){
  if (c._h === undefined){
    var parts = [c.r.k, c.r.t || ""];
    for (var i = 0; i < c.m.length; i++){
      var m = c.m[i]; parts.push(m.k);
      if (!m.same) parts.push(m.s ? textOf(m.s, 2) : (m.t || ""));
    }
    c._h = parts.join("\u0000").toLowerCase();
  }
  return c._h;
}
function applyFilter(){
  var q = $("filter").value.trim().toLowerCase();
  if (q === state.query) return;
  state.query = q;
  if (!q) state.list = ALL;
  else { var words = q.split(/\s+/);
         state.list = ALL.filter(function(c){ var h = hay(c);
           for (var i = 0; i < words.length; i++) if (h.indexOf(words[i]) < 0) return false; return true; }); }
  state.page = 0;
  render();
}
var timer = null;
$("filter").addEventListener("input", function(){ clearTimeout(timer); timer = setTimeout(applyFilter, 120); });
$("filter").addEventListener("keydown", function(e){ if (e.key === "Enter"){ clearTimeout(timer); applyFilter(); } });
["search", "change"].forEach(function(ev){ $("filter").addEventListener(ev, function(){ clearTimeout(timer); applyFilter(); }); });
function go(delta){ state.page += delta; render(); window.scrollTo(0, $("clusters").offsetTop - 60); }
["prev", "prev2"].forEach(function(id){ $(id).addEventListener("click", function(){ go(-1); }); });
["next", "next2"].forEach(function(id){ $(id).addEventListener("click", function(){ go(1); }); });
$("pagesize").addEventListener("change", function(){ state.size = parseInt($("pagesize").value, 10) || 50; state.page = 0; render(); });
render();
document.documentElement.setAttribute("data-ready", "1");
})();
