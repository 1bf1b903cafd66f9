import Crypto from 'node:crypto';
import { cborDecode } from '@animo-id/mdoc';
import { ValidationError } from '../../../lib/errors';
import type { Logger } from '../../../lib/logging';
import { encodeDeviceRequest, encodeEncryptionInfo, HpkeOpenError, newRecipientKey, openEncryptedResponse, type ItemsRequestInput } from '../../../lib/mdoc/annex-c';
import type { TenantContext } from '../../../lib/registry/kind';
import { annexCSessionTranscript } from '../../../lib/verify/mdoc';
import type { SigningService } from '../../kms/services/signing';
import type { PreparedPresentation, PresentationData, PresentationRequest, PresentationRequests, PresentationResponseType } from '../../oid4vp/services/requests';
import { PresentationFailure, type Concluded, type PresentationResponses } from '../../oid4vp/services/responses';
import type { LiveSession } from '../../sessions/services/session-service';

/** Spec 7.2: the failure without a code of a sealed response that does not open. */
export const HPKE_DECRYPTION_FAILED = 'HPKE decryption failed';

type MdocQuery = { id: string; format: string; meta: { doctype_value?: string }; claims?: Array<{ path: Array<string | number | null>; intent_to_retain?: boolean }> };

/**
 * ISO/IEC TS 18013-7 Annex C over POST /api/verifier/offer (`response_type: iso-18013-7`, registered with oid4vp)
 * and POST /presentations/{session}/iso-18013-7. The offer answers the DeviceRequest built from the configuration's
 * mso_mdoc DCQL queries (readerAuth signed by the access key chain when the configuration sets readerAuth) and the
 * EncryptionInfo of a fresh HPKE key; the sealed DeviceResponse is opened with that key, verified by the same code
 * as OpenID4VP mdocs (trust, status, DCQL matching) against the Annex C SessionTranscript, and the session completes
 * or fails from active (fetched is skipped). The SessionTranscript's origin is the request's single expected origin,
 * else the origin of the service's public URL; readerAuth covers it, so it is fixed when the request is made.
 */
export class AnnexCPresentations implements PresentationResponseType {
    constructor(private readonly deps: { publicUrl: string; signing: SigningService; requests: PresentationRequests; responses: PresentationResponses; log: Logger }) {}

    async create(ctx: TenantContext & { tenantId: string }, request: PresentationRequest, prepared: PreparedPresentation): Promise<{ session: string; deviceRequest: string; encryptionInfo: string }> {
        const refuse = (path: string, message: string): never => {
            throw new ValidationError(`response_type iso-18013-7: ${path} ${message}`, [{ path, message }]);
        };
        if (request.redirectUri) {
            refuse('redirectUri', 'cannot be overridden for ISO 18013-7');
        }
        if (request.transaction_data) {
            refuse('transaction_data', 'does not apply to ISO 18013-7');
        }
        if ((request.expected_origins?.length ?? 0) > 1) {
            refuse('expected_origins', 'must name one origin: the SessionTranscript readerAuth signs has one');
        }
        const dcqlQuery = mdocOnly(prepared.dcqlQuery, refuse);
        const queries = dcqlQuery.credentials as MdocQuery[];
        const items: ItemsRequestInput[] = queries.map((query) => {
            const nameSpaces: Record<string, Record<string, boolean>> = {};
            for (const claim of query.claims ?? []) {
                const [ns, element] = claim.path;
                if (claim.path.length !== 2 || typeof ns !== 'string' || typeof element !== 'string') {
                    refuse('requestId', `names a configuration whose claim path ${JSON.stringify(claim.path)} is not [namespace, element]`);
                }
                (nameSpaces[ns as string] ??= {})[element as string] = claim.intent_to_retain === true;
            }
            return { docType: query.meta.doctype_value!, nameSpaces };
        });
        const origin = new URL(request.expected_origins?.[0] ?? this.deps.publicUrl).origin;
        const key = newRecipientKey();
        const nonce = Crypto.randomBytes(16).toString('base64url');
        const encryptionInfo = encodeEncryptionInfo(key.publicJwk, nonce);
        const sessionTranscript = annexCSessionTranscript({ encryptionInfo, origin });
        const { tenantId } = ctx;
        const keyChainId = prepared.accessKeyChainId;
        const readerAuth = prepared.config.readerAuth
            ? { sessionTranscript, x5chain: (await this.deps.signing.material(tenantId, keyChainId)).x5c, sign: (data: Uint8Array) => this.deps.signing.sign(tenantId, keyChainId, data) }
            : undefined;
        const deviceRequest = await encodeDeviceRequest(items, readerAuth);
        const data: PresentationData = {
            clientId: prepared.clientId,
            responseUri: `${this.deps.publicUrl}/presentations/{session}/iso-18013-7`,
            nonce,
            dcqlQuery,
            encryptionKey: key,
            accessKeyChainId: keyChainId,
            skewSeconds: prepared.skewSeconds,
            statusCheckMode: prepared.statusCheckMode,
            ...(prepared.webhook ? { webhook: prepared.webhook } : {}),
            ...(prepared.redirectUri ? { redirectUri: prepared.redirectUri } : {}),
            protocol: 'iso-18013-7',
            encryptionInfo,
            origin
        };
        const session = await this.deps.requests.openSession(ctx, request, prepared, Crypto.randomBytes(24).toString('base64url'), data);
        return { session, deviceRequest, encryptionInfo };
    }

    /**
     * The sealed DeviceResponse of a live ISO 18013-7 session (the caller checked expiry and single use): opened,
     * verified and recorded. A response that does not open fails the session without a code (spec 7.2).
     */
    async receive(session: LiveSession<'presentation'>, sealed: string): Promise<Concluded> {
        const { data } = session;
        const sessionTranscript = annexCSessionTranscript({ encryptionInfo: data.encryptionInfo!, origin: data.origin! });
        return this.deps.responses.conclude(session, data, async () => {
            let deviceResponse: Uint8Array;
            try {
                deviceResponse = await openEncryptedResponse(sealed, data.encryptionKey.privateJwk, sessionTranscript);
            }
            catch (err) {
                if (err instanceof HpkeOpenError) {
                    this.deps.log.info({ sessionId: session.id, detail: err.message }, 'ISO 18013-7 response did not open');
                    throw new PresentationFailure(undefined, HPKE_DECRYPTION_FAILED);
                }
                throw err;
            }
            const encoded = Buffer.from(deviceResponse).toString('base64url');
            // One DeviceResponse answers every query: each query takes the documents of its docType, and a query
            // whose docType is absent is missing (reported by the DCQL match). An undecodable response goes to every
            // query, whose verification reports it.
            const present = docTypesOf(deviceResponse);
            const queries = data.dcqlQuery.credentials as MdocQuery[];
            const vpToken = Object.fromEntries(queries
                .filter((q) => !present || present.has(q.meta.doctype_value!))
                .map((q) => [q.id, encoded]));
            return this.deps.responses.verify(session, data, vpToken, { audience: data.clientId, mdocTranscript: sessionTranscript, docTypes: true });
        }, { from: 'active', iso: true });
    }
}

type Dcql = PreparedPresentation['dcqlQuery'];

/**
 * The part of a DCQL query a DeviceRequest can carry: its mso_mdoc queries, and of credential_sets the options made of
 * them alone. A configuration whose required credentials need another format (a required set left without options,
 * or, without credential_sets, any other query) is refused, so a session never waits for what it cannot receive.
 */
const mdocOnly = (query: Dcql, refuse: (path: string, message: string) => never): Dcql => {
    const credentials = (query.credentials as MdocQuery[]).filter((q) => q.format === 'mso_mdoc' && q.meta.doctype_value);
    if (!credentials.length) {
        refuse('requestId', 'names a configuration without mso_mdoc credential queries');
    }
    const ids = new Set(credentials.map((q) => q.id));
    const sets = query.credential_sets as Array<{ options: string[][]; required?: boolean }> | undefined;
    if (!sets) {
        if (credentials.length !== query.credentials.length) {
            refuse('requestId', 'names a configuration that requires credentials other than mso_mdoc');
        }
        return query;
    }
    const kept = [];
    for (const set of sets) {
        const options = set.options.filter((option) => option.every((id) => ids.has(id)));
        if (options.length) {
            kept.push({ ...set, options });
        }
        else if (set.required !== false) {
            refuse('requestId', 'names a configuration whose required credential set has no mso_mdoc-only option');
        }
    }
    return { ...query, credentials: credentials as Dcql['credentials'], ...(kept.length ? { credential_sets: kept } : { credential_sets: undefined }) } as Dcql;
};

const docTypesOf = (deviceResponse: Uint8Array): Set<string> | undefined => {
    try {
        const decoded = cborDecode(deviceResponse) as unknown;
        const documents = decoded instanceof Map ? decoded.get('documents') : undefined;
        if (!Array.isArray(documents)) {
            return undefined;
        }
        return new Set(documents.map((d: unknown) => (d instanceof Map ? d.get('docType') : undefined)).filter((t): t is string => typeof t === 'string'));
    }
    catch {
        return undefined;
    }
};
