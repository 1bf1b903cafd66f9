export const SCHEMA_BASE = 'https://schemas.hallmark.dev/config';

export const schemaUrl = (file: string, version: number): string => `${SCHEMA_BASE}/v${version}/${file}.schema.json`;

const pattern = /^https:\/\/schemas\.hallmark\.dev\/config\/v([1-9][0-9]{0,3})\/([A-Za-z]+)\.schema\.json$/;

export const parseSchemaUrl = (url: string): { file: string; version: number } | undefined => {
    const match = pattern.exec(url);
    return match ? { version: Number(match[1]), file: match[2]! } : undefined;
};
