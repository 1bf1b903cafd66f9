/** How to reach the database: one SQLite file, or a PostgreSQL server. */
export type DatabaseConfig =
    | { type: 'sqlite'; filename: string }
    | {
        type: 'postgres';
        host: string;
        port: number;
        user: string;
        password: string;
        database: string;
        ssl?: { rejectUnauthorized: boolean; caPath?: string; certPath?: string; keyPath?: string; passphrase?: string };
    };
