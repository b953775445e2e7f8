// A chart as runtime_run_code's text gives it: a port of the Go SDK's
// tools/chart.go, whose text it gives byte for byte (the numbers a figure
// plots, for a model to read beside its image).
import type { Chart, ChartElement } from "../code.js";

/** How many points of a series the text shows, evenly spread. */
export const CHART_TEXT_POINTS = 20;
/** How many elements (or charts) of a chart the text shows. */
export const CHART_TEXT_ELEMENTS = 50;
const MAX_CHART_POINTS = 10000;

/** The chart's lines, the first prefixed by label. */
export function chartText(label: string, c: Chart): string {
  const out: string[] = [];
  writeChart(out, `${label}: `, "  ", c);
  return out.join("");
}

const quote = (s: unknown): string => JSON.stringify(typeof s === "string" ? s : "");

function writeChart(out: string[], head: string, indent: string, c: Chart): void {
  let s = `${head}chart ${c.type}`;
  if (c.title) s += ` ${quote(c.title)}`;
  if (c.type !== "pie" && c.type !== "superchart") s += `; x: ${axis(c.xLabel, c.xScale)}; y: ${axis(c.yLabel, c.yScale)}`;
  if (c.truncated === true) s += `; thinned to ${MAX_CHART_POINTS} points`;
  out.push(s + "\n");
  const charts = c.charts ?? [];
  for (let i = 0; i < charts.length; i++) {
    if (i === CHART_TEXT_ELEMENTS) {
      out.push(`${indent}... ${charts.length - i} more charts\n`);
      break;
    }
    writeChart(out, indent, indent + "  ", charts[i]!);
  }
  const els = c.elements ?? [];
  for (let i = 0; i < els.length; i++) {
    if (i === CHART_TEXT_ELEMENTS) {
      out.push(`${indent}... ${els.length - i} more elements\n`);
      break;
    }
    out.push(indent + element(c.type, els[i]!) + "\n");
  }
}

function axis(label: string | undefined, scale: string | undefined): string {
  let s = label ? quote(label) : "(no label)";
  if (scale) s += ` (${scale})`;
  return s;
}

function element(type: string, e: ChartElement): string {
  const l = quote(e.label);
  switch (type) {
    case "line":
    case "scatter": {
      const pts = e.points ?? [];
      const n = pts.length;
      const k = Math.min(n, CHART_TEXT_POINTS);
      const parts: string[] = [];
      for (let i = 0; i < k; i++) {
        const p = pts[k > 1 ? Math.floor((i * (n - 1)) / (k - 1)) : 0];
        if (Array.isArray(p) && p.length === 2) parts.push(`(${coord(p[0])}, ${coord(p[1])})`);
      }
      let s = `${l}: ${n} points (x, y): ${parts.join(" ")}`;
      if (k < n) s += ` (${k} of ${n}, evenly spread)`;
      return s;
    }
    case "bar":
      return `${l} in ${quote(e.group)}: ${num(e.value)}`;
    case "pie":
      return `${l}: ${num(e.angle)} degrees, radius ${num(e.radius)}`;
    case "box_and_whisker": {
      let s = `${l}: min ${num(e.min)}, first quartile ${num(e.firstQuartile)}, median ${num(e.median)}, third quartile ${num(e.thirdQuartile)}, max ${num(e.max)}`;
      const outliers = e.outliers ?? [];
      if (outliers.length > 0) {
        const parts: string[] = [];
        for (let i = 0; i < outliers.length; i++) {
          if (i === CHART_TEXT_POINTS) {
            parts.push(`and ${outliers.length - i} more`);
            break;
          }
          parts.push(num(outliers[i]));
        }
        s += `, outliers ${parts.join(" ")}`;
      }
      return s;
    }
  }
  return l;
}

function coord(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (typeof v === "number") return g6(v);
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

function num(v: unknown): string {
  return typeof v === "number" ? g6(v) : "null";
}

/** v with 6 significant digits, as Go's strconv 'g' and C's %g: "0.0634239", "1e+06". */
export function g6(v: number): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  const [mant, expStr] = v.toExponential(5).split("e") as [string, string];
  const exp = Number(expStr);
  const trim = (s: string): string => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  if (exp < -4 || exp >= 6) {
    const e = Math.abs(exp);
    return `${trim(mant)}e${exp < 0 ? "-" : "+"}${e < 10 ? "0" : ""}${e}`;
  }
  return trim(v.toFixed(Math.max(0, 5 - exp)));
}
