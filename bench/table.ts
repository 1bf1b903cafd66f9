/** Prints rows as an aligned text table. Benchmarks report; they never pass or fail. */
export const printTable = (title: string, rows: Array<Record<string, string | number>>): void => {
    if (!rows.length) {
        return;
    }
    const headers = Object.keys(rows[0]!);
    const cell = (v: string | number) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : v);
    const widths = headers.map((h) => Math.max(h.length, ...rows.map((r) => cell(r[h] ?? '').length)));
    const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join('  ');
    process.stdout.write(`\n${title}\n${line(headers)}\n${line(widths.map((w) => '-'.repeat(w)))}\n`);
    for (const row of rows) {
        process.stdout.write(`${line(headers.map((h) => cell(row[h] ?? '')))}\n`);
    }
};

export const percentile = (sorted: number[], p: number): number =>
    sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
