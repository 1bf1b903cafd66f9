import type { Manifest } from '../lib/compose';
import type { Config } from './environment';
import * as bundles from '../plugins/bundles';
import * as consolePlugin from '../plugins/console';
import * as core from '../plugins/core';
import type { CoreOptions } from '../plugins/core/options';
import * as docs from '../plugins/docs';
import * as kms from '../plugins/kms';
import * as kmsDb from '../plugins/kms-db';
import * as kmsHttp from '../plugins/kms-http';
import * as kmsPkcs11 from '../plugins/kms-pkcs11';
import * as kmsVault from '../plugins/kms-vault';
import * as kmsCloud from '../plugins/kms-cloud';
import * as kmsCsc from '../plugins/kms-csc';
import type { KmsOptions } from '../plugins/kms/options';
import * as oauth2 from '../plugins/oauth2';
import type { OAuth2Options } from '../plugins/oauth2/options';
import * as oid4vci from '../plugins/oid4vci';
import type { Oid4vciOptions } from '../plugins/oid4vci/options';
import * as iso18013 from '../plugins/iso18013';
import * as oid4vp from '../plugins/oid4vp';
import type { Oid4vpOptions } from '../plugins/oid4vp/options';
import * as observability from '../plugins/observability';
import * as sessions from '../plugins/sessions';
import type { SessionsOptions } from '../plugins/sessions/options';
import * as status from '../plugins/status';
import * as tenancy from '../plugins/tenancy';
import * as trust from '../plugins/trust';
import type { TenancyOptions } from '../plugins/tenancy/options';

/**
 * Every plugin, configured from the environment: the full service. A host composes its own manifest with a subset,
 * or with options of its own (no environment needed).
 */
export const manifest = (config: Config): Manifest => {
    const { publicUrl } = config;
    return {
        name: 'default',
        server: { port: config.port, host: config.host, validateResponses: config.env === 'test' },
        plugins: [
            {
                plugin: core.plugin,
                options: {
                    database: config.db,
                    secrets: config.secrets,
                    outbound: config.outbound,
                    worker: config.worker,
                    configImport: config.configImport,
                    httpLog: {
                        enabled: config.log.http,
                        responseBody: config.log.httpResponseBody,
                        responseBodyMaxLength: config.log.httpResponseBodyMaxLength,
                        redact: config.log.redact
                    }
                } satisfies CoreOptions
            },
            { plugin: observability.plugin, options: config.otel satisfies observability.ObservabilityOptions },
            {
                plugin: oauth2.plugin,
                options: {
                    publicUrl,
                    tokenTtl: config.auth.tokenTtl,
                    clientId: config.auth.clientId,
                    clientSecret: config.auth.clientSecret,
                    oidc: config.auth.oidc
                } satisfies OAuth2Options
            },
            { plugin: tenancy.plugin, options: { audit: config.audit } satisfies TenancyOptions },
            { plugin: kms.plugin, options: { publicUrl, timeoutMs: config.kms.timeoutMs, configImport: config.configImport } satisfies KmsOptions },
            { plugin: kmsDb.plugin },
            { plugin: kmsHttp.plugin },
            { plugin: kmsPkcs11.plugin },
            { plugin: kmsVault.plugin },
            { plugin: kmsCloud.plugin },
            { plugin: kmsCsc.plugin },
            {
                plugin: sessions.plugin,
                options: {
                    ttl: config.sessions.ttl,
                    cleanupMode: config.sessions.cleanupMode,
                    tidyUpInterval: config.sessions.tidyUpInterval,
                    sessionLog: { enabled: config.log.session, store: config.log.sessionStore }
                } satisfies SessionsOptions
            },
            {
                plugin: oid4vci.plugin,
                options: {
                    publicUrl,
                    // loadConfig requires one of the two.
                    nonceSecret: config.secrets.masterSecret ?? config.secrets.encryptionKey!,
                    multiConsumption: config.sessions.issuerMultiConsumption
                } satisfies Oid4vciOptions
            },
            { plugin: status.plugin, options: { publicUrl } satisfies status.StatusOptions },
            { plugin: oid4vp.plugin, options: { publicUrl } satisfies Oid4vpOptions },
            { plugin: iso18013.plugin, options: { publicUrl } satisfies iso18013.Iso18013Options },
            { plugin: bundles.plugin, options: { variables: config.configImport.variables } satisfies Partial<bundles.BundlesOptions> },
            { plugin: trust.plugin },
            { plugin: docs.plugin },
            { plugin: consolePlugin.plugin, options: { oidcIssuer: config.auth.oidc?.issuer } satisfies consolePlugin.ConsoleOptions }
        ]
    };
};
