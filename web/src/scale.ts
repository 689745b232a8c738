// Linear scales and round tick values for the chart and the profile's time axis.

export interface Scale {
  domain: [number, number];
  at(value: number): number;
}

/** The lowest and highest value (widened when they are equal, so a scale has a span). */
export function extent(values: Iterable<number>): [number, number] {
  let low = Infinity;
  let high = -Infinity;
  for (const v of values) {
    low = Math.min(low, v);
    high = Math.max(high, v);
  }
  if (low > high) return [0, 1];
  return low === high ? [low - 1, high + 1] : [low, high];
}

/** Maps the domain onto [from, to] (pixels). */
export function linearScale([low, high]: [number, number], from: number, to: number): Scale {
  return { domain: [low, high], at: (value) => from + ((value - low) / (high - low)) * (to - from) };
}

/** A round step (1, 2 or 5 times a power of ten) that cuts the domain in about five. */
function tickStep([low, high]: [number, number]): number {
  const rough = (high - low) / 5;
  const power = 10 ** Math.floor(Math.log10(rough));
  return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? rough;
}

/** The domain widened to whole steps, so that the highest value meets a grid line. */
export function niceDomain(domain: [number, number]): [number, number] {
  const step = tickStep(domain);
  return [Math.floor(domain[0] / step) * step, Math.ceil(domain[1] / step) * step];
}

/** Round values across the domain, about five. */
export function ticks([low, high]: [number, number]): number[] {
  const step = tickStep([low, high]);
  const first = Math.ceil(low / step) * step;
  const result: number[] = [];
  // Counted rather than accumulated: adding a tiny step to a huge value may not move it.
  for (let i = 0; i <= 10 && first + i * step <= high + step * 1e-9; i++) result.push(first + i * step);
  return result;
}
