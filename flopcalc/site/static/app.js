// The page: reads the settings from the form (and the URL), evaluates them with calc.js on the data of data.js,
// and renders the numbers, the law, the chart and the commands. State lives in the URL query.
"use strict";

(() => {
  const DATA = window.FLOPCALC_DATA;
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const cards = new Map(DATA.cards.map((c) => [c.name, c]));
  const aliases = new Map();
  for (const c of DATA.cards) for (const a of [c.name, ...c.aliases]) aliases.set(a.toLowerCase(), c.name);
  const SYMBOL_INPUT = { H: "height", W: "width", S: "steps", B: "batch", L: "tokens", F: "frames", R: "refs" };
  const GIB = 2 ** 30;
  const SYMBOL_TEXT = DATA.constants.symbols;

  // ------------------------------------------------------------------ formatting

  const fmtInt = (big) => Calc.withCommas(big);
  const sig = (x, n = 3) => (Math.abs(x) >= 10 ** n ? Math.round(x).toLocaleString("en-US") : Number(x.toPrecision(n)).toLocaleString("en-US", { maximumSignificantDigits: n }));
  const tflops = (big) => (Number(big) / 1e12).toLocaleString("en-US", { minimumFractionDigits: 3, maximumFractionDigits: 3 });
  const gib = (big) => (Number(big) / GIB).toFixed(2);
  const task = (c) => (c.video ? "video" : "image");

  // ------------------------------------------------------------------ the form

  function fillSelects() {
    const opts = DATA.cards.map((c) => `<option value="${esc(c.name)}">${esc(c.name)} · ${esc(c.title)}${c.law ? "" : " (no law)"}</option>`).join("");
    $("model").innerHTML = opts;
    $("compare").innerHTML = DATA.cards.filter((c) => c.law !== null).map((c) => `<option value="${esc(c.name)}">${esc(c.name)}</option>`).join("");
    $("gpu").innerHTML = DATA.gpus.table.map((g) => `<option value="${esc(g.key)}">${esc(g.name)}</option>`).join("");
    $("precision").innerHTML = DATA.constants.precisions.map((p) => `<option value="${p}">${p}</option>`).join("");
    $("offload").innerHTML = DATA.constants.offload.map((o) => `<option value="${o}">${o}</option>`).join("");
  }

  function filterModels() {
    const q = $("search").value.trim().toLowerCase();
    for (const opt of $("model").options) {
      const c = cards.get(opt.value);
      const hay = [c.name, c.title, c.hub_id || "", ...c.aliases, c.pipeline || "", task(c)].join(" ").toLowerCase();
      opt.hidden = q !== "" && !q.split(/\s+/).every((w) => hay.includes(w));
    }
    const current = $("model").selectedOptions[0];
    if (current && current.hidden) {
      const first = [...$("model").options].find((o) => !o.hidden);
      if (first) { $("model").value = first.value; onModel(); }
    }
  }

  /** The form's settings for the card (blank fields: the card's defaults). */
  function readState() {
    const num = (id) => { const v = $(id).value.trim(); return v === "" ? null : Number(v); };
    return { model: $("model").value, H: num("height"), W: num("width"), S: num("steps"), B: num("batch"),
      L: num("tokens"), F: num("frames"), R: num("refs"), guidance: num("guidance"), truecfg: $("truecfg").checked,
      gpu: $("gpu").value, precision: $("precision").value, tf32: $("tf32").checked, offload: $("offload").value,
      stream: $("stream").checked, bpg: num("bpg") === null ? 1 : num("bpg"), swap: num("swap") === null ? 0 : num("swap"),
      grid: num("grid"), compare: [...$("compare").selectedOptions].map((o) => o.value).filter((m) => m !== $("model").value).slice(0, 3) };
  }

  /** Sets the form to a card's defaults (where the card has a law). */
  function setDefaults(card) {
    for (const [sym, id] of Object.entries(SYMBOL_INPUT)) {
      const input = $(id);
      const has = card.law !== null && card.symbols.includes(sym);
      input.closest("label").hidden = !has;
      if (!has) { input.value = ""; continue; }
      const d = card.domain[sym];
      input.value = card.defaults[sym];
      Object.assign(input, { min: d.lo, max: d.hi, step: d.step });
    }
    $("guidance").value = card.law !== null && card.guidance.default !== null ? card.guidance.default : "";
    $("guidance").closest("label").hidden = card.law === null;
    const trueCfg = card.law !== null && card.variants.some((v) => v.key === "true-cfg");
    $("truecfg").closest("label").hidden = !trueCfg;
    if (!trueCfg) $("truecfg").checked = false;
  }

  function onModel() {
    setDefaults(cards.get($("model").value));
    update();
  }

  function fromUrl() {
    const q = new URLSearchParams(location.search);
    const model = aliases.get((q.get("model") || "flux-dev").toLowerCase()) || DATA.cards[0].name;
    $("model").value = model;
    setDefaults(cards.get(model));
    const keys = { height: "height", width: "width", steps: "steps", batch: "batch", tokens: "tokens", frames: "frames",
      refs: "refs", guidance: "guidance", grid: "grid" };
    for (const [param, id] of Object.entries(keys)) if (q.has(param)) $(id).value = q.get(param);
    if (q.has("gpu")) {
      try { $("gpu").value = Calc.resolveGpu(DATA, q.get("gpu")).gpu.key; } catch (e) { $("gpu").dataset.unknown = q.get("gpu"); }
    } else $("gpu").value = "h100-sxm";
    const g = DATA.gpus.table.find((x) => x.key === $("gpu").value);
    $("precision").value = q.get("precision") || (g ? Calc.defaultPrecision(g) : "bf16");
    $("tf32").checked = q.get("tf32") === "1";
    $("truecfg").checked = q.get("truecfg") === "1" && !$("truecfg").closest("label").hidden;
    $("offload").value = q.get("offload") || "none";
    $("stream").checked = q.get("stream") === "1";
    $("bpg").value = q.get("bpg") || "";
    $("swap").value = q.get("swap") || "";
    const cmp = (q.get("compare") || "").split(",").filter((m) => m);
    for (const o of $("compare").options) o.selected = cmp.includes(o.value);
  }

  function toUrl(s, card) {
    const q = new URLSearchParams();
    q.set("model", s.model);
    for (const [sym, id] of Object.entries(SYMBOL_INPUT)) {
      if (card.law !== null && card.symbols.includes(sym) && s[sym] !== null) q.set(id, s[sym]);
    }
    if (card.law !== null && s.guidance !== null) q.set("guidance", s.guidance);
    if (s.truecfg) q.set("truecfg", "1");
    q.set("gpu", s.gpu); q.set("precision", s.precision);
    if (s.tf32) q.set("tf32", "1");
    if (s.offload !== "none") q.set("offload", s.offload);
    if (s.stream) q.set("stream", "1");
    if (s.bpg !== 1) q.set("bpg", s.bpg);
    if (s.swap) q.set("swap", s.swap);
    if (s.grid !== null) q.set("grid", s.grid);
    if (s.compare.length) q.set("compare", s.compare.join(","));
    try { history.replaceState(null, "", "?" + q.toString()); } catch (e) { /* file:// in some browsers */ }
  }

  // ------------------------------------------------------------------ evaluation

  /** Which guidance branch the settings take, or why the page cannot say exactly. */
  function pickVariant(card, s) {
    const g = card.guidance;
    if (s.truecfg) return card.variants.find((v) => v.key === "true-cfg") || null;
    const usual = card.variants.filter((v) => v.key !== "true-cfg");
    if (g.rule === "any" || s.guidance === null || s.guidance === g.default) return usual.find((v) => v.key === "default");
    if (g.rule === "gt1") return usual.find((v) => (v.passes > 1) === (s.guidance > 1)) || null;
    return null;
  }

  /** The symbol values of the settings, and the settings outside the checked domain. */
  function valuesOf(card, s, variant) {
    const values = { P: variant.passes }, outside = [];
    for (const sym of card.symbols) {
      if (sym === "P") continue;
      const v = s[sym] === null ? card.defaults[sym] : s[sym];
      const d = card.domain[sym];
      const aligned = sym === "F" ? (v - card.defaults.F) % d.step === 0 : v % d.step === 0 || d.step === 1;
      if (!Number.isInteger(v) || v < d.lo || v > d.hi || !aligned) {
        outside.push(`${SYMBOL_INPUT[sym]} ${v} (checked: ${d.lo}–${d.hi}${d.step > 1 ? ` in steps of ${d.step}` : ""})`);
      }
      values[sym] = v;
    }
    return { values, outside };
  }

  function cliArgs(card, s, values, variant) {
    const args = [];
    const flag = DATA.constants.flags, settingOf = DATA.constants.setting_of;
    for (const sym of card.symbols) {
      if (sym === "P") continue;
      const v = values[sym];
      if (["H", "W", "S"].includes(sym) || v !== card.defaults[sym]) args.push(flag[settingOf[sym]], String(v));
    }
    if (s.guidance !== null && s.guidance !== card.guidance.default) args.push("--guidance-scale", String(s.guidance));
    if (variant && variant.key === "true-cfg") args.push("--true-cfg-scale", String(variant.settings.true_cfg_scale), "--negative-prompt");
    if (card.bins) args.push("--no-resolution-binning");
    return args;
  }

  /** The offload options that apply to ``mode`` (streams and blocks per group to group offloading, a block swap
   * without offload): each row of the memory table, and the command of the chosen mode, takes only those. */
  function offloadOpts(mode, s) {
    const group = mode === "group-block" || mode === "group-leaf";
    return { stream: group && s.stream, bpg: mode === "group-block" ? s.bpg : 1, swap: mode === "none" ? s.swap : 0 };
  }

  function offloadArgs(mode, o) {
    return [...(mode !== "none" ? ["--offload", mode] : []), ...(o.stream ? ["--stream"] : []),
      ...(o.bpg !== 1 ? ["--blocks-per-group", String(o.bpg)] : []), ...(o.swap ? ["--block-swap", String(o.swap)] : [])];
  }

  function commands(card, s, values, variant) {
    const run = card.law === null ? [] : cliArgs(card, s, values, variant);
    const dtype = DATA.constants.memory_dtype[s.precision];
    const off = offloadArgs(s.offload, offloadOpts(s.offload, s));
    const hw = ["--gpu", s.gpu, "--precision", s.precision, ...(s.tf32 ? ["--tf32"] : []), ...off,
      ...(s.grid !== null ? ["--grid-intensity", String(s.grid)] : [])];
    const sizes = run.filter((a, i) => ["--height", "--width", "--num-frames", "--max-sequence-length", "--reference-images"].includes(run[i - 1]) || ["--height", "--width", "--num-frames", "--max-sequence-length", "--reference-images"].includes(a));
    return {
      estimate: ["flopcalc", "estimate", card.name, ...run],
      energy: ["flopcalc", "energy", card.name, ...hw, ...run],
      memory: ["flopcalc", "memory", card.name, "--gpu", s.gpu, "--dtype", dtype, ...off, ...run],
      train: ["flopcalc", "train", card.name, ...sizes],
      symbolic: ["flopcalc", "symbolic", card.name],
    };
  }

  /** Everything the page shows for one card at the settings (each part a value or the reason it is missing). */
  function evaluate(card, s) {
    const out = { card, s };
    if (card.law === null) { out.why = card.why; out.cmd = commands(card, s, {}, null); return out; }
    const variant = pickVariant(card, s);
    if (!variant) {
      out.why = s.truecfg ? "true CFG is not a branch this card's law covers" :
        `guidance ${s.guidance}: the page checked this card only at its default guidance ${card.guidance.default}`;
      out.cmd = commands(card, s, valuesOf(card, s, card.variants[0]).values, null);
      return out;
    }
    const { values, outside } = valuesOf(card, s, variant);
    out.variant = variant; out.values = values; out.cmd = commands(card, s, values, variant);
    if (outside.length) { out.why = `not checked at ${outside.join(", ")}: the law is exact where the plan takes the same branches`; return out; }
    out.rows = variant.rows.map((r) => ({ ...r, value: Calc.lawInt(r.flops, values) }));
    out.total = out.rows.reduce((a, r) => a + r.value, 0n);
    const g = DATA.gpus.table.find((x) => x.key === s.gpu);
    const dtype = DATA.constants.memory_dtype[s.precision];
    if (variant.memory.why) out.memoryWhy = variant.memory.why;
    else {
      out.memory = {};
      for (const mode of DATA.constants.offload) {
        try { out.memory[mode] = Calc.memory(DATA, variant.memory, values, dtype, mode, g, "fused", offloadOpts(mode, s)); } catch (e) { out.memory[mode] = { why: e.message }; }
      }
    }
    if (!variant.features) out.energyWhy = variant.features_why;
    else {
      try {
        const mem = out.memory ? out.memory[s.offload] : null;
        if (mem && mem.why) throw new Error(mem.why);
        const items = Number(values.B) * variant.memory.nipp;
        const pixels = (values.H || 0) * (values.W || 0) * (values.F || 1);
        const work = Calc.workOf(variant.features, values, items, pixels, values.S || 0, variant.passes);
        const moved = mem ? mem.transfer_per_item : 0;
        const grid = s.grid === null ? DATA.constants.grid_g_per_kwh : s.grid;
        out.energy = Calc.predict(DATA, work, Calc.denoiserKind(variant.rows, out.rows.map((r) => r.value)), s.gpu,
          s.precision, s.tf32, mem ? mem.fits : null, moved ? moved / g.host_link_bytes_per_s : 0.0, grid);
      } catch (e) { out.energyWhy = e.message; }
    }
    const t = card.training;
    if (t.law && t.law.v.every((v) => ["H", "W", "L", "F", "R"].includes(v))) out.training = Calc.lawInt(t.law, values);
    else out.trainingWhy = t.why || "the training law depends on more than the sizes";
    return out;
  }

  // ------------------------------------------------------------------ the law, as the page evaluates it

  const gcd = (a, b) => { a = a < 0n ? -a : a; b = b < 0n ? -b : b; while (b) [a, b] = [b, a % b]; return a; };

  /** A law of data.js as HTML: coefficient × monomial per term, helpers as floor(…) / ceiling(…) / Min(…) / Max(…). */
  function lawHtml(law) {
    const names = [...law.v, ...law.h.map((h) => {
      const inner = h.a.map(lawHtml).join(", ");
      return (h.s > 1 ? `${h.s}·` : "") + `${h.k}(${inner})`;
    })];
    const d = BigInt(law.d);
    const terms = law.t.map(([coef, exps]) => {
      let c = BigInt(coef);
      const g = gcd(c, d) || 1n;
      const num = c / g, den = d / g;
      const mono = exps.map((e, i) => (e === 0 ? "" : `${names[i]}${e > 1 ? `<sup>${e}</sup>` : ""}`)).filter((x) => x).join("·");
      const neg = num < 0n;
      const abs = neg ? -num : num;
      let text = mono ? (abs === 1n ? mono : `${abs}·${mono}`) : `${abs}`;
      if (den !== 1n) text += `/${den}`;
      return [neg, text];
    });
    if (!terms.length) return "0";
    let out = terms.map(([neg, text], i) => (i === 0 ? (neg ? "−" : "") + text : (neg ? " − " : " + ") + text)).join("");
    if (law.q) out = `(${out}) / (${lawHtml(law.q)})`;
    return out;
  }

  // ------------------------------------------------------------------ the chart (plain SVG)

  const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

  function series(card, s, axis) {
    if (card.law === null) return null;
    const variant = pickVariant(card, s);
    if (!variant) return null;
    const { values } = valuesOf(card, s, variant);
    const d = axis === "F" ? card.domain.F : card.domain.H;
    if (!d || d.lo === d.hi) return null;
    const xs = [];
    const start = axis === "F" ? d.lo : Math.max(d.lo, card.domain.W ? card.domain.W.lo : d.lo);
    const stop = axis === "F" ? d.hi : Math.min(d.hi, card.domain.W ? card.domain.W.hi : d.hi);
    const step = axis === "F" ? d.step : Math.max(d.step, card.domain.W ? card.domain.W.step : 1);
    const stride = Math.max(1, Math.ceil((stop - start) / step / 60));
    for (let x = start; x <= stop; x += step * stride) xs.push(x);
    const parts = variant.rows.map((r) => ({ label: r.label, ys: [] }));
    const totals = [];
    for (const x of xs) {
      const v = axis === "F" ? { ...values, F: x } : { ...values, H: x, W: x };
      let tot = 0;
      variant.rows.forEach((r, i) => { const y = Number(Calc.lawInt(r.flops, v)); parts[i].ys.push(y); tot += y; });
      totals.push(tot);
    }
    return { xs, parts, totals };
  }

  function chart(results, axis) {
    const W = 640, H = 340, L = 70, R = 150, T = 16, Bm = 40;
    const all = results.map((r) => ({ r, ser: series(r.card, r.s, axis) })).filter((x) => x.ser);
    if (!all.length) return "<p class=\"note\">No chart: the law does not depend on this axis, or the settings are outside the checked domain.</p>";
    const compare = all.length > 1;
    const lines = [];
    all.forEach(({ r, ser }, i) => {
      if (!compare) ser.parts.forEach((p, j) => lines.push({ label: p.label, xs: ser.xs, ys: p.ys, colour: COLOURS[(j + 1) % COLOURS.length], width: 1.5 }));
      lines.push({ label: compare ? r.card.name : "total", xs: ser.xs, ys: ser.totals, colour: compare ? COLOURS[i] : "#000", width: compare ? 2 : 2.2, dash: compare ? "" : "4 2" });
    });
    const xsAll = lines.flatMap((l) => l.xs), ysAll = lines.flatMap((l) => l.ys).filter((y) => y > 0);
    const x0 = Math.log2(Math.min(...xsAll)), x1 = Math.log2(Math.max(...xsAll));
    const y0 = Math.floor(Math.log10(Math.min(...ysAll))), y1 = Math.ceil(Math.log10(Math.max(...ysAll)));
    const px = (x) => L + (W - L - R) * ((Math.log2(x) - x0) / ((x1 - x0) || 1));
    const py = (y) => T + (H - T - Bm) * (1 - (Math.log10(Math.max(y, 10 ** y0)) - y0) / ((y1 - y0) || 1));
    let svg = `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="FLOPs against ${axis === "F" ? "frames" : "resolution"}" data-testid="chart">`;
    for (let e = y0; e <= y1; e++) svg += `<line x1="${L}" x2="${W - R}" y1="${py(10 ** e)}" y2="${py(10 ** e)}" class="grid"/><text x="${L - 6}" y="${py(10 ** e) + 4}" text-anchor="end">1e${e}</text>`;
    const ticks = [];
    for (let e = Math.ceil(x0); e <= Math.floor(x1); e++) ticks.push(2 ** e);
    if (ticks.length < 2) ticks.push(Math.min(...xsAll), Math.max(...xsAll));
    for (const t of ticks) svg += `<line y1="${T}" y2="${H - Bm}" x1="${px(t)}" x2="${px(t)}" class="grid"/><text x="${px(t)}" y="${H - Bm + 16}" text-anchor="middle">${t}</text>`;
    svg += `<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle">${axis === "F" ? "frames" : "image side in pixels (square)"}</text>`;
    svg += `<text transform="translate(14 ${(T + H - Bm) / 2}) rotate(-90)" text-anchor="middle">FLOPs per generation</text>`;
    lines.forEach((l, i) => {
      const d = l.xs.map((x, j) => `${j ? "L" : "M"}${px(x).toFixed(1)},${py(l.ys[j]).toFixed(1)}`).join("");
      svg += `<path d="${d}" fill="none" stroke="${l.colour}" stroke-width="${l.width}"${l.dash ? ` stroke-dasharray="${l.dash}"` : ""}/>`;
      svg += `<rect x="${W - R + 8}" y="${T + 14 * i}" width="10" height="3" fill="${l.colour}"/><text x="${W - R + 22}" y="${T + 14 * i + 5}" class="legend">${esc(l.label)}</text>`;
    });
    for (const { r } of all) {
      if (r.total === undefined) continue;
      const v = r.values;
      const x = axis === "F" ? v.F : Math.sqrt(v.H * v.W);
      svg += `<circle cx="${px(x)}" cy="${py(Number(r.total))}" r="5" class="point"><title>${esc(r.card.name)}: ${fmtInt(r.total)} FLOPs</title></circle>`;
    }
    return svg + "</svg>";
  }

  // ------------------------------------------------------------------ rendering

  const shell = (args) => args.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(" ");
  const cmdBlock = (id, args) => `<code data-testid="cli-${id}">${esc(shell(args))}</code>`;

  function metric(testid, label, text, value, extra = "") {
    const attr = value === null ? "" : ` data-value="${value}"`;
    const wide = testid === "total-flops" || testid === "train-flops" ? " wide" : "";
    return `<div class="metric${wide}"><div class="label">${label}</div><div class="value" data-testid="${testid}"${attr}>${text}</div>${extra}</div>`;
  }

  /** Under the peak (peak_bytes: the caching allocator's reserved peak, the workspaces and the CUDA context, what
   * decides an out-of-memory error): the live tensors' peak (peak_allocated_bytes), the reserve above it with its
   * cross-validated error, and the verdict (by peak_bytes, as `flopcalc memory`). */
  function peakLines(m) {
    const r = m.reserve, above = r.allocator_bytes + r.workspace_bytes;
    return `<div class="small" data-testid="peak-allocated-gib" data-value="${Number(m.peak_allocated) / GIB}">live tensors ${gib(m.peak_allocated)} GiB (peak_allocated_bytes)</div>` +
      `<div class="small" data-testid="reserve-error" data-value="${r.error}">+ allocator and workspaces ${gib(above)} GiB ± ${(100 * r.error).toFixed(0)}%, CUDA context ${gib(r.context_bytes)} GiB (at ${esc(r.at || "")}, ${gib(r.allocated_peak_bytes)} GiB live; peak ${gib(r.peak_bytes_low)}–${gib(r.peak_bytes_high)} GiB)</div>` +
      `<span hidden data-testid="peak-range-gib" data-value="${Number(r.peak_bytes_low) / GIB},${Number(r.peak_bytes_high) / GIB}"></span>` +
      `<div class="small ${m.fits === false ? "nofit" : "fits"}" data-testid="fits">${esc(m.verdict)} on ${esc(m.gpu.name)}</div>`;
  }

  /** Side by side: each compared model at the same size (its own defaults otherwise), on the same GPU. */
  function compareTable(all) {
    const cell = (v) => (v === undefined || v === null ? "<span class=\"missing\">—</span>" : v);
    const rows = all.map((r) => {
      const m = r.memory ? r.memory[r.s.offload] : null;
      return `<tr><td>${esc(r.card.name)}</td><td class="n">${cell(r.total !== undefined ? tflops(r.total) : null)}</td>` +
        `<td class="n">${cell(r.energy ? sig(r.energy.energy_j) : null)}</td><td class="n">${cell(r.energy ? r.energy.latency_s.toFixed(2) : null)}</td>` +
        `<td class="n">${cell(m && !m.why ? gib(m.peak) : null)}</td><td>${cell(r.why ? esc(r.why) : "")}</td></tr>`;
    });
    return "<h3>Compared</h3><table data-testid=\"compare\"><thead><tr><th>model</th><th>TFLOPs</th><th>energy J</th><th>latency s</th><th>peak GiB</th><th>note</th></tr></thead><tbody>" +
      rows.join("") + "</tbody></table>";
  }

  function render(res, compare) {
    const { card, s } = res;
    const out = [];
    out.push(`<h2>${esc(card.title)} <span class="sub">${esc(card.name)}${card.pipeline ? " · " + esc(card.pipeline) : ""}${card.hub_id ? " · " + esc(card.hub_id) : ""}</span></h2>`);
    const e = res.energy, m = res.memory ? res.memory[s.offload] : null;
    const missing = "<span class=\"missing\">—</span>";
    out.push("<div class=\"metrics\">");
    out.push(metric("total-flops", "FLOPs per generation", res.total !== undefined ? fmtInt(res.total) : missing, res.total !== undefined ? res.total.toString() : null,
      res.total !== undefined ? `<div class="small">${tflops(res.total)} TFLOPs</div>` : ""));
    out.push(metric("energy-j", "energy per item", e ? `${sig(e.energy_j)} J` : missing, e ? e.energy_j : null,
      e ? `<div class="small">90%: ${sig(e.energy_j_interval[0])}–${sig(e.energy_j_interval[1])} J · ${(e.energy_j / 3600).toFixed(2)} Wh</div>` : ""));
    out.push(metric("latency-s", "latency per item", e ? `${e.latency_s.toFixed(2)} s` : missing, e ? e.latency_s : null,
      e ? `<div class="small">90%: ${e.latency_s_interval[0].toFixed(2)}–${e.latency_s_interval[1].toFixed(2)} s</div>` : ""));
    out.push(metric("co2-g", "CO2e per item", e ? `${e.co2e_g.toFixed(2)} g` : missing, e ? e.co2e_g : null,
      e ? `<div class="small">${e.co2e_g_interval[0].toFixed(2)}–${e.co2e_g_interval[1].toFixed(2)} g at ${s.grid === null ? DATA.constants.grid_g_per_kwh : s.grid} g/kWh</div>` : ""));
    out.push(metric("peak-gib", `peak GPU memory (${esc(s.offload)} offload)`, m && !m.why ? `${gib(m.peak)} GiB` : missing, m && !m.why ? Number(m.peak) / GIB : null,
      m && !m.why ? peakLines(m) : ""));
    out.push(metric("train-flops", "training FLOPs per sample", res.training !== undefined ? fmtInt(res.training) : missing,
      res.training !== undefined ? res.training.toString() : null, res.training === undefined ? `<div class="small">${esc(res.trainingWhy || "")}</div>` : "<div class=\"small\">full fine-tune, batch 1</div>"));
    out.push("</div>");
    if (res.why) out.push(`<p class="why" data-testid="why">${esc(res.why)}. The command line counts it:</p>`);
    out.push(`<div class="cmds">${cmdBlock("estimate", res.cmd.estimate)}${cmdBlock("energy", res.cmd.energy)}${cmdBlock("memory", res.cmd.memory)}</div>`);
    if (res.rows) {
      const t = res.total;
      out.push("<h3>FLOPs per component</h3><table><thead><tr><th>component</th><th>class</th><th>FLOPs</th><th>share</th><th>energy J</th><th>latency s</th></tr></thead><tbody>");
      for (const r of res.rows) {
        const ce = e ? e.components.find((c) => c.component === r.component) : null;
        const first = res.rows.find((x) => x.component === r.component) === r;
        out.push(`<tr><td>${esc(r.label)}</td><td>${esc(r.class_name)}</td><td class="n">${fmtInt(r.value)}</td><td class="n">${t ? (Number(r.value * 10000n / t) / 100).toFixed(2) : "0"}%</td>` +
          `<td class="n">${ce && first ? sig(ce.energy_j) : ""}</td><td class="n">${ce && first ? ce.latency_s.toFixed(3) : ""}</td></tr>`);
      }
      out.push(`<tr class="total"><td>total</td><td></td><td class="n">${fmtInt(t)}</td><td class="n">100%</td><td></td><td></td></tr></tbody></table>`);
    }
    if (compare.length) out.push(compareTable([res, ...compare]));
    if (card.law !== null) {
      out.push("<h3>FLOPs against " + (card.video && !compare.length ? "frames" : "resolution") + (compare.length ? ", compared" : "") + "</h3>");
      out.push(`<div class="chart">${chart([res, ...compare], card.video && !compare.length ? "F" : "H")}</div>`);
    }
    if (e) {
      out.push("<h3>Energy and latency</h3><ul class=\"facts\">");
      out.push(`<li>${esc(e.gpu.name)}, ${esc(e.precision)}: calibration ${esc(e.calibration)} (${e.models} models), stack ${esc(e.stack)}: ${esc(e.stack_description)}</li>`);
      out.push(`<li>power ${sig(e.energy_j / e.latency_s)} W average; physics: latency ≥ ${sig(e.bounds.min_latency_s)} s (every FLOP at the dense peak), power between idle ${e.bounds.min_power_w} W and TDP ${e.bounds.max_power_w} W</li>`);
      out.push(`<li>held-out error (nested leave-one-model-out): energy median ${e.errors.energy.median_pct.toFixed(1)}% / max ${e.errors.energy.max_pct.toFixed(1)}%, latency median ${e.errors.latency.median_pct.toFixed(1)}% / max ${e.errors.latency.max_pct.toFixed(1)}%</li>`);
      for (const w of e.warnings) out.push(`<li class="warn">${esc(w)}</li>`);
      out.push("</ul>");
    } else if (res.energyWhy) out.push(`<h3>Energy and latency</h3><p class="why">${esc(res.energyWhy)}; run <code>${esc(shell(res.cmd.energy))}</code></p>`);
    if (res.memory) {
      out.push("<h3>GPU memory</h3><table><thead><tr><th>offload</th><th>weights resident GiB</th><th>live tensors peak GiB</th><th>peak GiB (reserved + context)</th><th>" + esc(DATA.gpus.table.find((g) => g.key === s.gpu).name) + "</th></tr></thead><tbody>");
      for (const [mode, mm] of Object.entries(res.memory)) {
        if (mm.why) { out.push(`<tr><td>${mode}</td><td colspan="4" class="why">${esc(mm.why)}</td></tr>`); continue; }
        out.push(`<tr${mode === s.offload ? " class=\"chosen\"" : ""}><td>${mode}</td><td class="n">${gib(mm.resident)}</td><td class="n">${gib(mm.peak_allocated)}</td><td class="n">${gib(mm.peak)} (${gib(mm.reserve.peak_bytes_low)}–${gib(mm.reserve.peak_bytes_high)})</td><td class="${mm.fits === false ? "nofit" : "fits"}">${mm.fits === false ? "does not fit" : mm.fits ? "fits" : "estimated part fits"} (headroom ${gib(mm.headroom)} GiB)</td></tr>`);
      }
      out.push(`</tbody></table><p class="note">Weights in ${esc(DATA.constants.memory_dtype[s.precision])}, activations with fused attention${m && m.missing && m.missing.length ? `; no activation estimate for ${esc(m.missing.join(", "))} (not measured)` : ""}. The peak is what decides an out-of-memory error: the caching allocator's reserved peak (its rounding and fragmentation above the live tensors, replayed or fitted, with the fit's cross-validated error on that part), the cuBLAS workspaces and the CUDA context; the verdict compares it with the GPU's memory.</p>`);
    } else if (res.memoryWhy) out.push(`<h3>GPU memory</h3><p class="why">${esc(res.memoryWhy)}; run <code>${esc(shell(res.cmd.memory))}</code></p>`);
    if (res.variant) {
      out.push(`<h3>The law</h3><p class="note">Branch: ${esc(res.variant.label)}. Exact for ${Object.entries(card.domain).map(([k, d]) => `${SYMBOL_INPUT[k]} ${d.lo}–${d.hi}${d.step > 1 ? ` (steps of ${d.step})` : ""}`).join(", ")}; checked against the command line at ${card.checked_points} settings. <code>${esc(shell(res.cmd.symbolic))}</code></p>`);
      const sym = Object.entries(SYMBOL_TEXT).filter(([k]) => card.symbols.includes(k)).map(([k, t]) => `${k} = ${t}`).join("; ");
      out.push(`<div class="law" data-testid="law"><p class="note">FLOPs of each component (torch convention, 2 × MACs); ${esc(sym)}; P = ${res.variant.passes} here.</p><table>` +
        res.variant.rows.map((r) => `<tr><td>${esc(r.label)}</td><td class="expr">${lawHtml(r.flops)}</td></tr>`).join("") + "</table></div>");
    }
    if (card.law !== null && card.options.length) out.push(`<p class="note">This pipeline also takes ${card.options.map((o) => `<code>--${esc(o.replace(/_/g, "-"))}</code>`).join(", ")}: set them on the command line.</p>`);
    if (res.training !== undefined) out.push(`<p class="note">Training: <code>${esc(shell(res.cmd.train))}</code></p>`);
    return out.join("");
  }

  function update() {
    const t0 = performance.now();
    const s = readState();
    const card = cards.get(s.model);
    const res = evaluate(card, s);
    const compare = s.compare.map((m) => evaluate(cards.get(m), { ...s, model: m, H: s.H, W: s.W, F: null, L: null, R: null, guidance: null, truecfg: false }));
    $("results").innerHTML = render(res, compare);
    toUrl(s, card);
    const ms = performance.now() - t0;
    document.body.dataset.renderMs = ms.toFixed(1);
    return ms;
  }

  fillSelects();
  fromUrl();
  for (const id of ["height", "width", "steps", "batch", "tokens", "frames", "refs", "guidance", "grid", "bpg", "swap"]) $(id).addEventListener("input", update);
  for (const id of ["truecfg", "gpu", "precision", "tf32", "offload", "stream", "compare"]) $(id).addEventListener("change", update);
  $("model").addEventListener("change", onModel);
  $("search").addEventListener("input", filterModels);
  $("reset").addEventListener("click", (ev) => { ev.preventDefault(); onModel(); });
  window.flopcalcPage = { update, onModel, evaluate: (m, s) => evaluate(cards.get(m), s) };
  update();
  document.body.dataset.firstRenderMs = performance.now().toFixed(1);  // since the navigation started
})();
