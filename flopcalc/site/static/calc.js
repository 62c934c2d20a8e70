// flopcalc's evaluation functions, ported to the browser. Each function names the Python function it mirrors;
// every number it reads comes from data.js (written by flopcalc/site/export.py from flopcalc/data and the
// modules that define the constants), none is typed here. Exact integers are BigInt; floating-point steps follow
// the Python order of operations, so the page agrees with the command line to ~1e-15 (the tests ask 1e-9).
"use strict";

const Calc = (() => {
  // ------------------------------------------------------------------ laws (exact)

  /** Floor division of BigInts (Python's //). */
  function floorDiv(a, b) {
    const q = a / b;
    return (a % b !== 0n && ((a < 0n) !== (b < 0n))) ? q - 1n : q;
  }

  /** d × law at integer values: mirrors flopcalc.site.laws._scaled (and flopcalc.flops.sweep._IntegerLaw.scaled). */
  function lawScaled(law, values) {
    const gens = law.v.map((name) => {
      if (values[name] === undefined) throw new Error(`the law needs ${name}`);
      return BigInt(values[name]);
    });
    for (const h of law.h) {
      const parts = h.a.map((a) => [lawScaled(a, values), BigInt(a.d)]);
      if (h.k === "floor") gens.push(floorDiv(parts[0][0], parts[0][1]));
      else if (h.k === "ceiling") gens.push(-floorDiv(-parts[0][0], parts[0][1]));
      else {
        const scale = BigInt(h.s);
        const vals = parts.map(([v, d]) => v * (scale / d));
        gens.push(vals.reduce((m, v) => (h.k === "Min" ? (v < m ? v : m) : (v > m ? v : m))));
      }
    }
    let total = 0n;
    for (const [coef, exps] of law.t) {
      let term = BigInt(coef);
      for (let i = 0; i < exps.length; i++) if (exps[i]) term *= gens[i] ** BigInt(exps[i]);
      total += term;
    }
    return total;
  }

  /** The law's exact value as a fraction {n, d}: mirrors flopcalc.site.laws.evaluate. */
  function lawValue(law, values) {
    let n = lawScaled(law, values), d = BigInt(law.d);
    if (law.q) {
      const q = lawValue(law.q, values);
      n *= q.d; d *= q.n;
    }
    if (d < 0n) { n = -n; d = -d; }
    return { n, d };
  }

  /** The law's value when it is an integer (FLOPs): a BigInt, else an error. */
  function lawInt(law, values) {
    const r = lawValue(law, values);
    if (r.n % r.d !== 0n) throw new Error("the law is not an integer here");
    return r.n / r.d;
  }

  /** A fraction as the nearest double (Python's float(Fraction) up to one rounding). */
  function toNumber(r) {
    if (r.d === 1n) return Number(r.n);
    const q = r.n / r.d, rest = r.n % r.d;
    return Number(q) + Number(rest * 1000000000000000000n / r.d) / 1e18;
  }

  /** Digits with thousands separators (the report's {:,}). */
  function withCommas(big) {
    const s = (big < 0n ? -big : big).toString();
    return (big < 0n ? "-" : "") + s.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  // ------------------------------------------------------------------ the GPU table

  /** Mirrors flopcalc.hardware.gpus._normal: lower-case letters and digits only. */
  function normal(name) {
    return String(name).toLowerCase().replace(/[^a-z0-9]/g, "");
  }

  /** The GPU a name names: mirrors flopcalc.hardware.gpus.resolve (key, name or alias). */
  function resolveGpu(data, name) {
    const hit = data.gpus.index[normal(name)];
    if (!hit) throw new Error(`unknown GPU ${JSON.stringify(name)} (see \`flopcalc gpus\`)`);
    const g = data.gpus.table.find((x) => x.key === hit[0]);
    return { gpu: g, how: hit[1] === "alias" ? `alias ${name} → ${g.name}` : "" };
  }

  /** Mirrors flopcalc.energy_laws.predict.default_precision. */
  function defaultPrecision(g) {
    return "bf16" in g.peak_flops ? "bf16" : "fp16";
  }

  /** Mirrors flopcalc.energy_laws.backbone.peaks: the dense peak each op class runs at. */
  function peaks(g, precision, tf32) {
    const have = g.peak_flops;
    const need = (dtype) => {
      if (!(dtype in have)) {
        throw new Error(`${g.name} has no ${dtype} peak in the GPU table (it has ${Object.keys(have).join(", ")}); ` +
          "pick another --precision");
      }
      return have[dtype];
    };
    let dtypes;
    if (precision === "bf16" || precision === "fp16") dtypes = [precision, precision, precision];
    else if (precision === "fp8") {
      const half = "bf16" in have ? "bf16" : "fp16";
      dtypes = ["fp8", half, half];
    } else if (precision === "fp32") {
      if (tf32 && !("tf32" in have)) throw new Error(`--tf32: ${g.name} has no TF32 tensor cores (TF32 came with Ampere)`);
      const matmul = tf32 && "tf32" in have ? "tf32" : "fp32";
      dtypes = [matmul, matmul, "tf32" in have ? "tf32" : "fp32"];
    } else throw new Error(`--precision ${precision}: choose one of bf16, fp16, fp32, fp8`);
    return { linear: need(dtypes[0]), attention: need(dtypes[1]), conv: need(dtypes[2]), dtypes };
  }

  // ------------------------------------------------------------------ the work of a generation

  /** Per-item op-class work of every component: mirrors flopcalc.energy_laws.features.work_of (the features come
   * as laws, flopcalc/site/features.py; here they are evaluated and divided by the items of the batch). */
  function workOf(features, values, items, pixels, steps, passes) {
    const comps = Object.entries(features).map(([name, f]) => {
      const v = (k) => toNumber(lawValue(f[k], values)) / items;
      const c = { component: name, role: f.role, linear: v("linear"), attention: v("attention"), conv: v("conv"),
        elementwise: v("elementwise"), calls: v("calls"), weight_reads: v("weight_reads"), scores: v("scores"),
        attention_padded: v("attention_padded"), launches: v("launches") };
      return c;
    });
    return { components: comps, items, steps, cfg: passes > 1, pixels };
  }

  /** Mirrors Work.total. */
  function total(work, field) {
    return work.components.reduce((s, c) => s + c[field], 0);
  }

  /** Mirrors ComponentWork.unfused_elementwise (the softmax work arrives folded in: elementwise − SOFTMAX_OPS·scores
   * is stated by the export as the feature "unfused"). */
  function unfused(work, data) {
    return work.components.reduce((s, c) => s + (c.elementwise - data.constants.softmax_ops * c.scores), 0);
  }

  /** Mirrors flopcalc.energy_laws.fit.sample_of. */
  function sampleOf(data, work, gpuKey, precision, calibration, tf32) {
    const g = data.gpus.table.find((x) => x.key === gpuKey);
    const p = peaks(g, precision, tf32);
    const per = data.constants.bytes_per_parameter[precision];
    return {
      calibration, linear: total(work, "linear"), attention: total(work, "attention"),
      attention_padded: total(work, "attention_padded"), conv: total(work, "conv"), calls: total(work, "calls"),
      launches: total(work, "launches"), weight_bytes: total(work, "weight_reads") * per,
      elementwise_bytes: unfused(work, data) * per, items: work.items, cfg: work.cfg, pixels: work.pixels,
      peak_linear: p.linear, peak_attention: p.attention, peak_conv: p.conv, bandwidth: g.memory_bandwidth,
      tdp: g.tdp_w, idle: g.idle_w,
      peak_16bit: g.peak_flops.bf16 !== undefined ? g.peak_flops.bf16 : (g.peak_flops.fp16 !== undefined ? g.peak_flops.fp16 : p.linear),
    };
  }

  const flopsOf = (s) => s.linear + s.attention + s.conv;

  /** Mirrors Sample.compute_time. */
  function computeTime(s, padded) {
    return { linear: s.linear / s.peak_linear,
      attention: (padded ? s.attention_padded : s.attention) / s.peak_attention, conv: s.conv / s.peak_conv };
  }

  /** Mirrors Sample.min_latency. */
  function sampleMinLatency(s) {
    const t = computeTime(s, false);
    return t.linear + t.attention + t.conv;
  }

  /** Mirrors Sample.elementwise_ratio. */
  function elementwiseRatio(s) {
    return flopsOf(s) ? (s.elementwise_bytes / s.bandwidth) / sampleMinLatency(s) : 0.0;
  }

  // ------------------------------------------------------------------ the op-class law

  /** Mirrors flopcalc.energy_laws.laws.columns. */
  function columns(data, s, terms) {
    const compute = computeTime(s, terms.padded_attention);
    const cols = { ...compute };
    Object.assign(cols, { per_call: s.calls, launches: s.launches, weights: s.weight_bytes / s.bandwidth,
      elementwise: s.elementwise_bytes / s.bandwidth,
      small_batch: (compute.linear + compute.attention + compute.conv) / s.items });
    for (const t of data.constants.opclass_terms) {
      if (!data.constants.compute.includes(t) && !terms.optional.includes(t)) cols[t] = 0.0;
    }
    return cols;
  }

  /** Mirrors OpClassFit.time_parts. */
  function timeParts(data, fit, s) {
    const cols = columns(data, s, fit.terms);
    const out = {};
    for (const k of data.constants.opclass_terms) out[k] = fit.time[k] * cols[k];
    return out;
  }

  const sum = (xs) => xs.reduce((a, b) => a + b, 0);

  /** Mirrors OpClassFit.latency. */
  function fitLatency(data, fit, s) {
    return sum(Object.values(timeParts(data, fit, s)));
  }

  /** Mirrors OpClassFit.mean_power. */
  function meanPower(data, fit, s) {
    const parts = timeParts(data, fit, s);
    const tot = sum(Object.values(parts));
    const groups = data.constants.power_groups, groupOf = data.constants.group_of;
    const share = {};
    for (const g of groups) share[g] = sum(Object.entries(parts).filter(([k]) => groupOf[k] === g).map(([, v]) => v)) / tot;
    return s.idle + (s.tdp - s.idle) * sum(groups.map((g) => fit.power[g] * share[g]));
  }

  /** Mirrors flopcalc.energy_laws.fit._pi. */
  function pi(s) {
    return (s.peak_16bit || s.peak_linear) / s.tdp;
  }

  /** Mirrors flopcalc.energy_laws.fit.transferred. */
  function transferred(data, fit, ref, target, gamma) {
    const across = (pi(target) / pi(ref)) ** gamma;
    const time = { ...fit.time };
    for (const op of data.constants.compute) {
      const rTarget = target[`peak_${op}`] / (target.peak_16bit || target.peak_linear);
      const rRef = ref[`peak_${op}`] / (ref.peak_16bit || ref.peak_linear);
      time[op] = Math.max(1.0, fit.time[op] * across * Math.min(1.0, (rTarget / rRef) ** gamma));
    }
    return { ...fit, time };
  }

  // ------------------------------------------------------------------ the prediction

  /** Mirrors flopcalc.energy_laws.predict.denoiser_kind (the main denoiser: most MACs, the first of equals). */
  function denoiserKind(rows, flops) {
    let main = null, best = -1n;
    rows.forEach((r, i) => { if (r.role === "denoiser" && (main === null || flops[i] > best)) { main = r; best = flops[i]; } });
    return main !== null && main.class_name.includes("UNet") ? "unet" : "transformer";
  }

  function peakPerWatt(g) {
    const p = g.peak_flops.bf16 !== undefined ? g.peak_flops.bf16 : (g.peak_flops.fp16 !== undefined ? g.peak_flops.fp16 : 0.0);
    return p / g.tdp_w;
  }

  /** Mirrors flopcalc.energy_laws.predict.choose (the default stack: the first that runs the denoiser). */
  function choose(data, gpuKey, precision, kind) {
    const doc = data.energy, cals = doc.calibrations;
    const runs = Object.keys(doc.stacks).filter((s) => doc.stacks[s].denoisers.includes(kind));
    if (!runs.length) throw new Error(`no stack of these coefficients runs a ${kind} denoiser`);
    const chosen = runs[0];
    const cmp = (a, b) => { for (let i = 0; i < a.length; i++) { if (a[i] < b[i]) return -1; if (a[i] > b[i]) return 1; } return 0; };
    const mine = Object.keys(cals).filter((k) => cals[k].gpu === gpuKey && cals[k].stack === chosen)
      .sort((a, b) => cmp([cals[a].precision !== precision ? 1 : 0, -cals[a].models, a], [cals[b].precision !== precision ? 1 : 0, -cals[b].models, b]));
    if (mine.length) {
      const key = mine[0], measured = cals[key].precision;
      if (measured === precision) return { calibration: key, stack: chosen, transferred: false, notes: [] };
      const samePeak = ["bf16", "fp16"].includes(measured) && ["bf16", "fp16"].includes(precision);
      const note = samePeak ? `measured at ${measured}, which has the same tensor peak as ${precision}` :
        `no ${precision} measurement: the ${measured} efficiencies moved to the dtypes ${precision} runs in by the fitted transfer`;
      return { calibration: key, stack: chosen, transferred: !samePeak, notes: [note] };
    }
    const here = data.gpus.table.find((x) => x.key === gpuKey);
    const byKey = (k) => data.gpus.table.find((x) => x.key === k);
    const distance = (k) => [Math.abs(Math.log(peakPerWatt(byKey(cals[k].gpu)) / peakPerWatt(here))),
      cals[k].precision !== precision ? 1 : 0, -cals[k].models, k];
    const candidates = Object.keys(cals).filter((k) => cals[k].stack === chosen);
    let key = candidates[0];
    for (const k of candidates.slice(1)) if (cmp(distance(k), distance(key)) < 0) key = k;
    return { calibration: key, stack: chosen, transferred: true,
      notes: [`${here.key} has no ${chosen} calibration: the ${key} law moved to it by the fitted transfer`] };
  }

  /** Mirrors flopcalc.energy_laws.predict._out_of_range. */
  function outOfRange(s, rng) {
    const checks = { flops_per_item: flopsOf(s), batch_size: s.items, calls_per_item: s.calls,
      linear_share: s.linear / flopsOf(s), attention_share: s.attention / flopsOf(s), conv_share: s.conv / flopsOf(s),
      elementwise_vs_flop_time: elementwiseRatio(s) };
    const out = [];
    let distance = 0.0;
    for (const [key, value] of Object.entries(checks)) {
      const [lo, hi] = rng[key];
      if (value < lo * (1 - 1e-9) || value > hi * (1 + 1e-9)) {
        out.push(`${key.replace(/_/g, " ")} ${value.toPrecision(3)} outside the fitted range`);
        if (value > 0 && lo > 0) distance = Math.max(distance, Math.abs(Math.log(value / (value < lo ? lo : hi))));
      }
    }
    return [out, distance];
  }

  /** Mirrors flopcalc.energy_laws.predict._split: each component's share of latency and energy. */
  function split(data, work, s, fit, latency, energy) {
    const wr = total(work, "weight_reads"), uf = unfused(work, data);
    const parts = work.components.map((c) => {
      const own = { ...s, linear: c.linear, attention: c.attention, attention_padded: c.attention_padded, conv: c.conv,
        calls: c.calls,
        weight_bytes: wr ? s.weight_bytes * (c.weight_reads / wr) : 0.0,
        elementwise_bytes: uf ? s.elementwise_bytes * ((c.elementwise - data.constants.softmax_ops * c.scores) / uf) : 0.0 };
      const t = (flopsOf(own) || own.calls) ? fitLatency(data, fit, own) : 0.0;
      return [c, t, t ? meanPower(data, fit, own) * t : 0.0];
    });
    const tsum = sum(parts.map((p) => p[1])) || 1.0, esum = sum(parts.map((p) => p[2])) || 1.0;
    return parts.map(([c, t, e]) => ({ component: c.component, role: c.role, energy_j: e * energy / esum,
      latency_s: t * latency / tsum }));
  }

  /** Mirrors flopcalc.energy_laws.backbone.bounds and min_latency (one GPU). */
  function bounds(work, g, p) {
    const minLatency = total(work, "linear") / p.linear + total(work, "attention") / p.attention + total(work, "conv") / p.conv;
    return { min_latency_s: minLatency, max_power_w: g.tdp_w, min_power_w: g.idle_w };
  }

  /** Mirrors flopcalc.energy_laws.backbone.clamp. */
  function clamp(latency, energy, b) {
    const said = [];
    const lat = latency.map((t) => Math.max(t, b.min_latency_s));
    if (lat.some((t, i) => t !== latency[i])) said.push(`latency held at the physical minimum ${b.min_latency_s.toPrecision(3)} s (every FLOP at the dense peak)`);
    const en = energy.map((e, i) => Math.min(Math.max(e, b.min_power_w * lat[i]), b.max_power_w * lat[i]));
    if (en.some((a, i) => Math.abs(a - energy[i]) > 1e-9 * energy[i])) said.push(`energy held within idle ${b.min_power_w} W and TDP ${b.max_power_w} W over its latency`);
    return [lat, en, said];
  }

  /** Mirrors flopcalc.energy_laws.predict.predict: the op-class law on one GPU (fits and offload_s from memory). */
  function predict(data, work, kind, gpuName, precision, tf32, fits, offloadS, grid) {
    const { gpu: g, how } = resolveGpu(data, gpuName);
    precision = precision || defaultPrecision(g);
    const p = peaks(g, precision, tf32);
    const doc = data.energy;
    const choice = choose(data, g.key, precision, kind);
    const cal = doc.calibrations[choice.calibration];
    const flops = sum(work.components.map((c) => c.linear + c.attention + c.conv));
    if (flops <= 0) throw new Error("no counted work to predict from");
    const s = sampleOf(data, work, g.key, precision, choice.calibration, tf32);
    const ref = sampleOf(data, work, cal.gpu, cal.precision, choice.calibration, false);
    const warnings = [...choice.notes];
    if (how) warnings.unshift(how);
    let h = { energy: cal.errors.energy.interval_log_halfwidth, latency: cal.errors.latency.interval_log_halfwidth };
    const [out, distance] = outOfRange(ref, cal.fitted_range);
    warnings.push(...out.map((w) => `extrapolating: ${w}`));
    if (distance) h = { energy: h.energy + distance, latency: h.latency + distance };
    let fit = cal.opclass;
    if (choice.transferred) {
      fit = transferred(data, fit, ref, s, doc.transfer.gamma);
      const tr = doc.transfer.errors;
      if (tr && tr.energy) {
        h = { energy: h.energy + tr.energy.interval_log_halfwidth, latency: h.latency + tr.latency.interval_log_halfwidth };
        warnings.push(`transferred: leave-one-GPU-out error median ${tr.latency.median_pct.toFixed(0)}% (latency), ${tr.energy.median_pct.toFixed(0)}% (energy); interval widened by it`);
      }
    }
    let latency = fitLatency(data, fit, s);
    let energy = meanPower(data, fit, s) * latency;
    const comps = split(data, work, s, fit, latency, energy);
    if (offloadS) {
      latency += offloadS;
      energy += offloadS * g.idle_w * 1;
      warnings.push(`offload: ${offloadS.toPrecision(3)} s per item moving weights over the host link (GPU at idle power meanwhile)`);
    }
    if (fits === false) warnings.push(`does not fit in ${g.name}'s memory at these settings (\`flopcalc memory\`): predicted as if it did; \`flopcalc memory --fit\` lists the offload modes and quantizations under which it fits`);
    const b = bounds(work, g, p);
    const [lat, en, clamped] = clamp([latency * Math.exp(-h.latency), latency, latency * Math.exp(h.latency)],
      [energy * Math.exp(-h.energy), energy, energy * Math.exp(h.energy)], b);
    warnings.push(...clamped);
    const co2 = (j) => j / 3.6e6 * grid;
    return { gpu: g, precision, calibration: choice.calibration, stack: choice.stack,
      stack_description: doc.stacks[choice.stack].description, transferred: choice.transferred,
      energy_j: en[1], energy_j_interval: [en[0], en[2]], latency_s: lat[1], latency_s_interval: [lat[0], lat[2]],
      co2e_g: co2(en[1]), co2e_g_interval: [co2(en[0]), co2(en[2])], bounds: b, components: comps, warnings,
      errors: cal.errors, models: cal.models, flops_per_item: flops };
  }

  // ------------------------------------------------------------------ memory

  /** Python's round(): to the nearest integer, ties to even. */
  function pyRound(x) {
    const f = Math.floor(x), diff = x - f;
    if (diff > 0.5) return f + 1;
    if (diff < 0.5) return f;
    return f % 2 === 0 ? f : f + 1;
  }

  /** Mirrors flopcalc.gpu_memory.activations.peak_elements. */
  function peakElements(fit, n) {
    return Math.max(0, pyRound(Math.max(...fit.phases.map(([c0, c1, c2]) => c0 + c1 * n + c2 * n * n))));
  }

  /** Mirrors flopcalc.gpu_memory.allocator.reserve as MemoryEstimate._reserve_at calls it (no tensors replayed, no
   * largest block, inference): ``fit`` the exported laws per kind, ``gpu`` a row of the GPU table (its workspaces'
   * segments and CUDA context) or null, ``weights`` a Map kind → bytes (insertion order: the float sum's order),
   * ``exact`` [bytes, reserve above them] of replayed weights, ``law`` the call's own [factor, error] or null.
   * Byte counts are BigInt; each fitted part is Python's round() of the same float expression. */
  function reserve(fit, allocated, gpu, activation, kind, weights, exact, law) {
    const known = exact.reduce((s, [b]) => s + b, 0n);
    const rest = allocated - activation - known;
    const least = [allocated, activation, rest].reduce((m, x) => (x < m ? x : m));
    if (least < 0n) throw new Error(`reserve: ${activation} activation bytes and ${known} replayed weight bytes do not fit in ${allocated} allocated`);
    const kindLaw = (name) => {
      if (!(name in fit.kinds)) throw new Error(`reserve: kind ${JSON.stringify(name)}: choose one of ${Object.keys(fit.kinds).join(", ")}`);
      return fit.kinds[name];
    };
    let given = 0n;
    for (const b of weights.values()) given += b;
    if (given !== rest) throw new Error(`reserve: weights of ${given} B, not the ${rest} B left beside the activations and the replayed weights`);
    const exactReserve = exact.reduce((s, [, r]) => s + r, 0n);
    const parts = [];
    for (const [name, b] of weights) {
      if (!b) continue;
      const l = kindLaw(name);
      parts.push([BigInt(pyRound(l.weights_overhead * Number(b) + l.weights_constant_bytes)), l.weights_loco_max_rel_error]);
    }
    if (activation) {
      const l = kindLaw(kind);
      if (law === null || law === undefined) {
        parts.push([BigInt(pyRound((l.activation_factor - 1) * Number(activation) + l.activation_constant_bytes)),
          l.activation_loco_max_rel_error]);
      } else parts.push([BigInt(pyRound((law[0] - 1) * Number(activation))), law[1]]);
    }
    const fitted = exactReserve + parts.reduce((s, [p]) => s + p, 0n);
    const allocator = fitted > 0n ? fitted : 0n;
    const ws = gpu ? BigInt(gpu.workspace_bytes) : 0n;
    const total = allocator + ws;
    let uncertain = 0;
    for (const [p, e] of parts) {
      const a = p < 0n ? -p : p, sig = BigInt(fit.significant_bytes);
      uncertain += Number(a > sig ? a : sig) * e;
    }
    const context = gpu ? BigInt(gpu.context_bytes) : 0n;
    const reserved = allocated + allocator + ws, peak = reserved + context;
    const error = total ? uncertain / Number(total) : 0.0;
    // Reserve.peak_range: peak_bytes ± the reserve's uncertainty, never below the live tensors, workspaces and context
    const unc = BigInt(pyRound(error * Number(total))), floor = allocated + ws + context;
    return { allocated_peak_bytes: allocated, allocator_bytes: allocator, workspace_bytes: ws,
      reserved_peak_bytes: reserved, context_bytes: context, peak_bytes: peak,
      peak_bytes_low: peak - unc > floor ? peak - unc : floor, peak_bytes_high: peak + unc,
      error, note: gpu ? "" : fit.no_gpu_note };
  }

  /** Mirrors flopcalc.gpu_memory.estimate._check_offload: the options of group offloading and block swap. */
  function checkOffload(k, offload, bpg, stream, swap) {
    for (const [value, flag, low] of [[bpg, "--blocks-per-group", 1], [swap, "--block-swap", 0]]) {
      if (!Number.isInteger(value) || value < low || value > k.offload_option_max) {
        throw new Error(`${flag} must be an integer from ${low} to ${k.offload_option_max}, got ${value}`);
      }
    }
    if (stream && offload !== "group-block" && offload !== "group-leaf") throw new Error("--stream applies to group offloading (--offload group-block or group-leaf)");
    if (bpg !== 1 && offload !== "group-block") throw new Error("--blocks-per-group applies to --offload group-block");
    if (bpg !== 1 && stream) throw new Error("--blocks-per-group with --stream: diffusers runs one block per group with streams");
    if (swap && offload !== "none") throw new Error(`--block-swap keeps blocks on the host without an offload mode; not with --offload ${offload}`);
  }

  /** Mirrors flopcalc.gpu_memory.estimate.memory and MemoryEstimate's totals: weights, activations, what is resident
   * at the peak under the offload mode (with ``opts``: blocks_per_group, stream, block_swap), and whether it fits. */
  function memory(data, mem, values, dtype, offload, gpu, attention, opts = {}) {
    const k = data.constants;
    const bpg = opts.bpg === undefined ? 1 : opts.bpg, stream = !!opts.stream, swap = opts.swap || 0;
    checkOffload(k, offload, bpg, stream, swap);
    const w = mem.weights[dtype];
    if (!w || w.why) throw new Error(w ? w.why : `no weights for dtype ${dtype}`);
    if (["sequential", "group-block", "group-leaf"].includes(offload) && !(dtype in k.dtype_bytes)) {
      throw new Error(`--offload ${offload} with ${dtype} weights is not modelled (the hooks move quantized layers differently): use --offload model, or a bf16/fp16/fp32 dtype`);
    }
    const comps = w.components.map((c) => ({ ...c, bytes: BigInt(c.bytes), buffer_bytes: BigInt(c.buffer_bytes),
      largest_module_bytes: BigInt(c.largest_module_bytes), block_bytes: c.block_bytes.map(BigInt),
      kind: c.kind || "denoiser" }));
    const bpe = BigInt(k.activation_dtype_bytes[dtype]);
    const forwards = {}, acts = [];
    for (const row of mem.rows) {
      const runs = lawInt(row.runs, values), batch = lawInt(row.batch, values);
      const f = floorDiv(runs, batch);
      forwards[row.component] = (forwards[row.component] || 0n) + (f > 1n ? f : 1n);
      if (row.fit) {
        const n = Number(lawInt(row.n, values));
        const fit = row.fit[attention] || null;
        acts.push({ component: row.component, call: row.call, batch, law: row.law || null,
          bytes: fit === null ? null : BigInt(peakElements(fit, n)) * batch * bpe });
      }
    }
    const running = comps.filter((c) => c.runs);
    const max = (xs) => xs.reduce((m, x) => (x > m ? x : m), 0n);
    const actBytes = (name) => max(acts.filter((a) => a.component === name).map((a) => a.bytes || 0n));
    const weights = comps.reduce((s, c) => s + c.bytes, 0n);
    const buffers = comps.reduce((s, c) => s + c.buffer_bytes, 0n);
    const sum = (xs) => xs.reduce((s, x) => s + x, 0n);
    // _swapped: the running component with the most block bytes (the first on a tie), and its last `swap` blocks
    const den = running.reduce((m, c) => (m === null || sum(c.block_bytes) > sum(m.block_bytes) ? c : m), null);
    const swapped = swap && den ? den.block_bytes.slice(den.block_bytes.length - swap) : [];
    if (swap && (!den || swap > den.block_bytes.length)) {
      throw new Error(`--block-swap ${swap}: ${den ? den.component : "the denoiser"} has ${den ? den.block_bytes.length : 0} blocks`);
    }
    // _group: the largest group block-level group offloading has on the GPU at once while c runs
    const group = (c) => {
      const size = stream ? 1 : bpg, b = c.block_bytes, windows = [];
      for (let i = 0; i < b.length; i += size) windows.push(sum(b.slice(i, i + size)));
      if (!windows.length) windows.push(0n);
      if (stream && windows.length > 1) return max(windows.slice(1).map((y, i) => windows[i] + y));
      return max(windows);
    };
    // _held: what the mode holds while c runs, beyond what stays throughout (_always)
    const held = (c) => (offload === "sequential" ? c.largest_module_bytes
      : offload === "group-block" ? c.bytes - sum(c.block_bytes) + group(c)
        : offload === "group-leaf" ? c.largest_module_bytes * (stream ? 2n : 1n) : c.bytes);
    const always = offload === "sequential" ? buffers
      : offload === "none" ? (swap ? weights - sum(swapped) + max(swapped) : weights) : 0n;
    let peak, resident, transfer;
    if (offload === "none") {
      peak = always + max(comps.map((c) => actBytes(c.component)));
      resident = always;
      transfer = swap ? sum(swapped) * (forwards[den.component] || 1n) : 0n;
    } else {
      peak = always + max(running.map((c) => held(c) + actBytes(c.component)));
      resident = always + max(running.map(held));
      transfer = offload === "model" ? sum(running.map((c) => c.bytes))
        : offload === "sequential" ? sum(running.map((c) => (c.bytes - c.buffer_bytes) * (forwards[c.component] || 1n)))
          : sum(running.map((c) => c.bytes * (forwards[c.component] || 1n)));
    }
    // the two peaks: MemoryEstimate.peak_allocated_bytes (live tensors) and peak_bytes, the reserve of the moment
    // (_reserve_at) where it is largest (_reserve_peak: the first of equals)
    const resident_parts = (c) => {  // MemoryEstimate._resident_parts
      if (offload === "none") {
        return comps.map((x) => [x, swap && x === den ? x.bytes - sum(swapped) + max(swapped) : x.bytes]);
      }
      if (offload === "sequential") return comps.map((x) => [x, x.buffer_bytes + (x === c ? held(c) : 0n)]);
      return [[c, held(c)]];
    };
    const peakCall = (c) => {  // MemoryEstimate._peak_call
      let best = null;
      for (const a of acts) if (a.component === c.component && a.bytes && (best === null || a.bytes > best.bytes)) best = a;
      return best;
    };
    let chosen = null;
    for (const c of (offload === "none" ? comps : running)) {
      const exact = [], byKind = new Map();
      for (const [x, b] of resident_parts(c)) {
        if (x.weights_reserve !== undefined && b === x.bytes) exact.push([b, BigInt(x.weights_reserve)]);
        else if (b) byKind.set(x.kind, (byKind.get(x.kind) || 0n) + b);
      }
      const call = peakCall(c);
      const act = call === null ? 0n : call.bytes;
      const where = call === null ? c.component : `${c.component}.${call.call}`;
      const allocated = sum(exact.map(([b]) => b)) + sum([...byKind.values()]) + act;
      const r = reserve(k.allocator, allocated, gpu || null, act, c.kind, byKind, exact, call === null ? null : call.law);
      if (chosen === null || r.peak_bytes > chosen.peak_bytes) chosen = { ...r, at: where };
    }
    if (chosen === null) chosen = { ...reserve(k.allocator, 0n, gpu || null, 0n, "denoiser", new Map(), [], null), at: null };
    const items = Number(BigInt(values.B) * BigInt(mem.nipp));
    const out = { weights, resident, peak: chosen.peak_bytes, peak_allocated: peak, reserve: chosen, transfer, transfer_per_item: Number(transfer) / items, components: comps,
      activations: acts, missing: mem.rows.filter((r) => r.n && !r.fit).map((r) => r.component),
      unestimated: [...new Set(mem.rows.filter((r) => !r.fit).map((r) => `${r.component}.${r.call}`))] };
    if (gpu) {  // MemoryEstimate.fits and .verdict: None (null) when the estimated part fits but a call is not estimated
      out.gpu = gpu; out.headroom = BigInt(gpu.memory_bytes) - out.peak;  // by peak_bytes, as MemoryEstimate.fits
      out.fits = out.peak > BigInt(gpu.memory_bytes) ? false : out.unestimated.length ? null : true;
      out.verdict = out.fits === true ? "fits" : out.fits === false ? "does not fit"
        : `weights and the estimated activations fit; the activations of ${out.unestimated.join(", ")} are not estimated`;
    }
    return out;
  }

  return { floorDiv, lawScaled, lawValue, lawInt, toNumber, withCommas, normal, resolveGpu, defaultPrecision, peaks,
    workOf, sampleOf, columns, fitLatency, meanPower, transferred, denoiserKind, choose, outOfRange, split, bounds,
    clamp, predict, pyRound, peakElements, reserve, memory };
})();

if (typeof module !== "undefined") module.exports = Calc;
