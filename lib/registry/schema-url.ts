export const SCHEMA_BASE = 'https://schemas.hallmark.dev/config';

export const schemaUrl = (file: string, version: number): string => `${SCHEMA_BASE}/v${version}/${file}.schema.json`;

const pattern = /^https:\/\/schemas\.hallmark\.dev\/config\/v([1-9][0-9]{0,3})\/([A-Za-z]+)\.schema\.json$/;

export const parseSchemaUrl = (url: string): { file: string; version: number } | undefined => {
    const match = pattern.exec(url);
    return match ? { version: Number(match[1]), file: match[2]! } : undefined;
};

/**
 * The alteration target (joi `alter`/`tailor`) naming a document version's shape: a field that was different in
 * version n of a file carries `.alter({ [versionTarget(file, n)]: … })`, so the one joi schema also describes the
 * versions before the current one.
 */
export const versionTarget = (file: string, version: number): string => `${file}:v${version}`;

/** Targets that turn the current schema of `file` (at `current`) into the one of `version`: every version from it up. */
export const versionTargets = (file: string, version: number, current: number): string[] =>
    Array.from({ length: Math.max(current - version, 0) }, (_, i) => versionTarget(file, version + i));
