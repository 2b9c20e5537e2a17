// SVG charts for bench/RESULTS.md, drawn from a bench's own results (no hand-made images, no
// dependency): line charts (values per round, a latency timeline) and grouped bar charts (each
// node's share per condition). Every chart is a standalone .svg file in bench/charts/, which
// RESULTS.md shows next to the table of the same numbers (writeChart returns the markdown).
import fs from 'node:fs';
import path from 'node:path';
import { BENCH_DIR } from './common.mjs';

export const CHARTS_DIR = path.join(BENCH_DIR, 'charts');

const PALETTE = ['#4269d0', '#efb118', '#ff725c', '#6cc5b0', '#3ca951', '#ff8ab7', '#a463f2', '#97bbf5'];
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"';

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** About `count` round tick values covering [lo, hi]. */
function ticks(lo, hi, count = 5) {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/** A compact number: 12 345 → "12.3k", 0.0042 → "0.0042". */
export function short(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(a >= 1e7 ? 0 : 1)}M`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(a >= 1e4 ? 0 : 1)}k`;
  if (a === 0) return '0';
  return String(Number(v.toPrecision(3)));
}

/** One plot area: axes, ticks and grid for [x0,x1]×[y0,y1] in a box; returns the mapping functions and the SVG of the frame. */
function frame(box, xDomain, yDomain, { xLabel, yLabel, xTicks, yFormat = short, xFormat = short }) {
  const [x0, x1] = xDomain;
  const [y0, y1] = yDomain;
  const sx = (x) => box.left + ((x - x0) / (x1 - x0 || 1)) * box.width;
  const sy = (y) => box.top + box.height - ((y - y0) / (y1 - y0 || 1)) * box.height;
  const parts = [];
  for (const t of ticks(y0, y1)) {
    const y = sy(t);
    parts.push(`<line x1="${box.left}" x2="${box.left + box.width}" y1="${y}" y2="${y}" stroke="#ddd"/>`);
    parts.push(`<text x="${box.left - 6}" y="${y + 4}" text-anchor="end" font-size="11" fill="#555">${esc(yFormat(t))}</text>`);
  }
  for (const t of xTicks ?? ticks(x0, x1, 6)) {
    const x = sx(t);
    parts.push(`<line x1="${x}" x2="${x}" y1="${box.top + box.height}" y2="${box.top + box.height + 4}" stroke="#888"/>`);
    parts.push(`<text x="${x}" y="${box.top + box.height + 16}" text-anchor="middle" font-size="11" fill="#555">${esc(xFormat(t))}</text>`);
  }
  parts.push(`<line x1="${box.left}" x2="${box.left + box.width}" y1="${box.top + box.height}" y2="${box.top + box.height}" stroke="#888"/>`);
  parts.push(`<line x1="${box.left}" x2="${box.left}" y1="${box.top}" y2="${box.top + box.height}" stroke="#888"/>`);
  if (xLabel) parts.push(`<text x="${box.left + box.width / 2}" y="${box.top + box.height + 32}" text-anchor="middle" font-size="11" fill="#333">${esc(xLabel)}</text>`);
  if (yLabel) parts.push(`<text transform="translate(${box.left - 44} ${box.top + box.height / 2}) rotate(-90)" text-anchor="middle" font-size="11" fill="#333">${esc(yLabel)}</text>`);
  return { sx, sy, svg: parts.join('') };
}

function legend(names, x, y, width) {
  const parts = [];
  let cx = x;
  let cy = y;
  names.forEach((name, i) => {
    const w = 18 + name.length * 6.4 + 14;
    if (cx + w > x + width) {
      cx = x;
      cy += 16;
    }
    parts.push(`<rect x="${cx}" y="${cy - 9}" width="12" height="10" fill="${PALETTE[i % PALETTE.length]}"/>`);
    parts.push(`<text x="${cx + 16}" y="${cy}" font-size="11" fill="#333">${esc(name)}</text>`);
    cx += w;
  });
  return { svg: parts.join(''), bottom: cy + 8 };
}

function document(width, height, title, body) {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT}>` +
    `<rect width="${width}" height="${height}" fill="#fff"/>` +
    `<text x="12" y="20" font-size="13" font-weight="600" fill="#111">${esc(title)}</text>${body}</svg>\n`;
}

/**
 * Line charts side by side sharing one legend: `panels` = [{ yLabel, yFormat?, series: [{ name, points: [[x, y], …] }],
 * marks?: [{ x, label }] (vertical lines), yMin? }]; series with the same name keep the same colour in every panel.
 */
export function lineCharts({ title, xLabel, panels, xTicks, xFormat, width = 760, panelHeight = 220 }) {
  const names = [...new Set(panels.flatMap((p) => p.series.map((s) => s.name)))];
  const lg = legend(names, 12, 40, width - 24);
  const gap = 70;
  const panelWidth = (width - 70 - (panels.length - 1) * gap - 20) / panels.length;
  const top = lg.bottom + 14;
  const parts = [lg.svg];
  panels.forEach((p, i) => {
    const pts = p.series.flatMap((s) => s.points).filter(([, y]) => Number.isFinite(y));
    const xs = pts.map(([x]) => x);
    const ys = pts.map(([, y]) => y);
    const yHi = Math.max(...ys, 0) * 1.08 || 1;
    const yLo = p.yMin ?? 0;
    const box = { left: 70 + i * (panelWidth + gap), top, width: panelWidth, height: panelHeight };
    const f = frame(box, [Math.min(...xs), Math.max(...xs)], [yLo, yHi], { xLabel, yLabel: p.yLabel, xTicks, xFormat, yFormat: p.yFormat });
    parts.push(f.svg);
    for (const m of p.marks ?? []) {
      const x = f.sx(m.x);
      parts.push(`<line x1="${x}" x2="${x}" y1="${box.top}" y2="${box.top + box.height}" stroke="#999" stroke-dasharray="4 3"/>`);
      parts.push(`<text x="${x + 3}" y="${box.top + 10}" font-size="10" fill="#666">${esc(m.label)}</text>`);
    }
    for (const s of p.series) {
      const colour = PALETTE[names.indexOf(s.name) % PALETTE.length];
      const valid = s.points.filter(([, y]) => Number.isFinite(y));
      if (valid.length === 0) continue;
      parts.push(`<polyline fill="none" stroke="${colour}" stroke-width="1.8" points="${valid.map(([x, y]) => `${f.sx(x).toFixed(1)},${f.sy(y).toFixed(1)}`).join(' ')}"/>`);
      if (valid.length <= 20) for (const [x, y] of valid) parts.push(`<circle cx="${f.sx(x).toFixed(1)}" cy="${f.sy(y).toFixed(1)}" r="2.6" fill="${colour}"/>`);
    }
  });
  return document(width, top + panelHeight + 44, title, parts.join(''));
}

/**
 * Grouped bars: `groups` = [{ label, bars: [{ name, value }] }] (bars with the same name share a colour and the
 * legend), `yFormat` for the axis and the value printed on each bar.
 */
export function barChart({ title, yLabel, groups, yFormat = short, yMax, width = 760, height = 300 }) {
  const names = [...new Set(groups.flatMap((g) => g.bars.map((b) => b.name)))];
  const lg = legend(names, 12, 40, width - 24);
  const top = lg.bottom + 14;
  const box = { left: 70, top, width: width - 90, height: height - top - 44 };
  const hi = yMax ?? Math.max(...groups.flatMap((g) => g.bars.map((b) => b.value)), 0) * 1.1;
  const f = frame(box, [0, groups.length], [0, hi || 1], { yLabel, yFormat, xTicks: [] });
  const parts = [lg.svg, f.svg];
  const slot = box.width / groups.length;
  groups.forEach((g, i) => {
    const inner = slot * 0.8;
    const bw = inner / Math.max(1, g.bars.length);
    const gx = box.left + i * slot + slot * 0.1;
    g.bars.forEach((b, j) => {
      const colour = PALETTE[names.indexOf(b.name) % PALETTE.length];
      const y = f.sy(b.value);
      parts.push(`<rect x="${(gx + j * bw + 1).toFixed(1)}" y="${y.toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${(box.top + box.height - y).toFixed(1)}" fill="${colour}"/>`);
      parts.push(`<text x="${(gx + j * bw + bw / 2).toFixed(1)}" y="${(y - 3).toFixed(1)}" text-anchor="middle" font-size="10" fill="#333">${esc(yFormat(b.value))}</text>`);
    });
    parts.push(`<text x="${(box.left + i * slot + slot / 2).toFixed(1)}" y="${box.top + box.height + 16}" text-anchor="middle" font-size="11" fill="#333">${esc(g.label)}</text>`);
  });
  return document(width, height, title, parts.join(''));
}

/** Writes bench/charts/<name>.svg and returns the markdown that shows it in RESULTS.md. */
export function writeChart(name, svg, alt) {
  fs.mkdirSync(CHARTS_DIR, { recursive: true });
  fs.writeFileSync(path.join(CHARTS_DIR, `${name}.svg`), svg);
  return `![${alt}](charts/${name}.svg)`;
}
