/**
 * Hallmark's public extension API: everything a third-party KMS provider or resource-kind plugin needs, and nothing
 * it should not depend on. A plugin imports only from here (the package's `exports`), is a hapi plugin, and is added
 * to a deployment with one manifest line. It sits beside lib/ and plugins/ because it also carries the types of the
 * server decorations those plugins add (`server.registerResource`, `server.registry`, `server.registerKmsProvider`).
 *
 * A resource kind: define a `ResourceKind<Spec>` (joi schema, version, `dependsOn`, `location`, `secrets`), call
 * `server.registerResource(kind)` and route it with `resourceRoutes` (or `singletonRoutes`). The registry then gives
 * it validation, the audited write path, startup import from its folder, a JSON Schema at /api/schemas/…, export,
 * OpenAPI docs and ordering by `dependsOn`. A KMS provider: call `server.registerKmsProvider(type)`.
 */

// The server decorations (types only): registry, registerResource, registerJob, registerMigrations; kms,
// registerKmsProvider.
export type {} from './plugins/core';
export type {} from './plugins/kms';

export { pluginOptions, type Manifest, type ManifestEntry } from './lib/compose';
export { ConflictError, NotFoundError, UnavailableError, ValidationError, type ErrorDetail } from './lib/errors';
export { tenantContext } from './lib/auth/context';
export type { JobDefinition } from './lib/jobs';

// A plugin's own tables: models extend BaseModel (JSON and sealed columns); migrations are registered with
// `server.registerMigrations([{ name: 'YYYYMMDD_NNNN_topic', up, down }])` and run in name order.
export { BaseModel } from './lib/db/model';
export type { Migration } from './lib/db/migrate';

// Resource kinds and the registry.
export {
    GENERATE, kindRef, tenantOf,
    type ExportFields, type ExportRequirement, type KindRef, type Ownership, type RequirementCode, type ResourceKind,
    type ResourceStore, type StoreScope, type StoredResource, type TenantContext, type Upgrade, type UpgradeWarning
} from './lib/registry/kind';
export type { ConfigDocument, ExportResult, ExportedDocument, Registry, WriteOptions, WriteResult } from './lib/registry/registry';
export { tableResourceStore } from './lib/registry/resource-store';
export { resourceRoutes, singletonRoutes, type ResourceRoutesOptions } from './lib/http/resource-routes';

// Built-in kinds a plugin's kind may depend on or reference (`dependsOn: [keyChainKind.kind]`) and read.
export { clientKind, type Client } from './resources/client';
export { keyChainKind, type KeyChain } from './resources/key-chain';
export { kmsConfigKind, type KmsConfig } from './resources/kms-config';
export { tenantKind, type Tenant } from './resources/tenant';
export { trustListKind, type TrustList } from './resources/trust-list';
export { webhookEndpointKind, type WebhookEndpoint } from './resources/webhook-endpoint';

// KMS providers.
export { KmsUnavailableError, type KeyAlgorithm, type KeyStore, type KmsOpenContext, type KmsProviderType, type PublicJwk } from './lib/kms/types';
