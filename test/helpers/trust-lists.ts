import Crypto from 'node:crypto';
import Http from 'node:http';
import type Net from 'node:net';
import * as X509 from '@peculiar/x509';
import * as Jose from 'jose';
import { signedXml } from '../../plugins/trust/services/list-formats';

/**
 * Published trust lists for tests: ETSI TS 119 612 XML signed with xml-crypto (the library the service verifies
 * with), TS 119 602 lists of trusted entities as JWS, and a loopback server that serves them, can be slowed down,
 * changed between fetches and stopped.
 */

export interface ListService {
    type: string;
    certificates: X509.X509Certificate[];
    status?: string;
    name?: string;
}

export const SVC = {
    pidXml: 'https://ewc-consortium.github.io/ewc-trust-list/TrstSvc/Svctype/PID',
    walletXml: 'https://ewc-consortium.github.io/ewc-trust-list/TrstSvc/Svctype/NPWP',
    qcCa: 'http://uri.etsi.org/TrstSvc/Svctype/CA/QC',
    pidLote: 'http://uri.etsi.org/19602/SvcType/PID/Issuance',
    walletLote: 'http://uri.etsi.org/19602/SvcType/WalletSolution/Issuance',
    pidRevocationLote: 'http://uri.etsi.org/19602/SvcType/PID/Revocation'
} as const;

const GRANTED = 'http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/granted';

const der = (certificate: X509.X509Certificate) => Buffer.from(certificate.rawData).toString('base64');

/** An unsigned TrustServiceStatusList with one TSP per service. */
export const trustedListXml = (services: ListService[], nextUpdate: Date, sequence = 1): string => `<?xml version="1.0" encoding="UTF-8"?>
<tsl:TrustServiceStatusList xmlns:tsl="http://uri.etsi.org/02231/v2#" xmlns:xml="http://www.w3.org/XML/1998/namespace" Id="TrustServiceStatusList" TSLTag="http://uri.etsi.org/19612/TSLTag">
  <tsl:SchemeInformation>
    <tsl:TSLVersionIdentifier>6</tsl:TSLVersionIdentifier>
    <tsl:TSLSequenceNumber>${sequence}</tsl:TSLSequenceNumber>
    <tsl:TSLType>http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUgeneric</tsl:TSLType>
    <tsl:SchemeOperatorName><tsl:Name xml:lang="en">Test scheme operator</tsl:Name></tsl:SchemeOperatorName>
    <tsl:ListIssueDateTime>${new Date(Date.now() - 60_000).toISOString()}</tsl:ListIssueDateTime>
    <tsl:NextUpdate><tsl:dateTime>${nextUpdate.toISOString()}</tsl:dateTime></tsl:NextUpdate>
  </tsl:SchemeInformation>
  <tsl:TrustServiceProviderList>${services.map((service, i) => `
    <tsl:TrustServiceProvider>
      <tsl:TSPInformation><tsl:TSPName><tsl:Name xml:lang="en">${service.name ?? `Provider ${i}`}</tsl:Name></tsl:TSPName></tsl:TSPInformation>
      <tsl:TSPServices>
        <tsl:TSPService>
          <tsl:ServiceInformation>
            <tsl:ServiceTypeIdentifier>${service.type}</tsl:ServiceTypeIdentifier>
            <tsl:ServiceName><tsl:Name xml:lang="en">Service ${i}</tsl:Name></tsl:ServiceName>
            <tsl:ServiceDigitalIdentity>${service.certificates.map((c) => `<tsl:DigitalId><tsl:X509Certificate>${der(c)}</tsl:X509Certificate></tsl:DigitalId>`).join('')}</tsl:ServiceDigitalIdentity>
            <tsl:ServiceStatus>${service.status ?? GRANTED}</tsl:ServiceStatus>
            <tsl:StatusStartingTime>2025-01-01T00:00:00Z</tsl:StatusStartingTime>
          </tsl:ServiceInformation>
        </tsl:TSPService>
      </tsl:TSPServices>
    </tsl:TrustServiceProvider>`).join('')}
  </tsl:TrustServiceProviderList>
</tsl:TrustServiceStatusList>`;

export interface XmlSigner {
    privateKey: Crypto.KeyObject;
    certificate: X509.X509Certificate;
}

/** An enveloped XMLDSig over the whole list (URI ""), exclusive canonicalization, as trusted lists are signed. */
export const signTrustedList = (xml: string, signer: XmlSigner): string => {
    const rsa = signer.privateKey.asymmetricKeyType === 'rsa';
    const sig = signedXml({
        privateKey: signer.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
        publicCert: signer.certificate.toString('pem'),
        signatureAlgorithm: rsa ? 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256' : 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256',
        canonicalizationAlgorithm: 'http://www.w3.org/2001/10/xml-exc-c14n#'
    });
    sig.addReference({
        xpath: '/*',
        transforms: ['http://www.w3.org/2000/09/xmldsig#enveloped-signature', 'http://www.w3.org/2001/10/xml-exc-c14n#'],
        digestAlgorithm: 'http://www.w3.org/2001/04/xmlenc#sha256',
        isEmptyUri: true
    });
    sig.computeSignature(xml, { prefix: 'ds', location: { reference: '/*', action: 'append' } });
    return sig.getSignedXml();
};

/** A TS 119 602 list of trusted entities, signed as a JWS (x5c when given). */
export const signLote = async (services: ListService[], nextUpdate: Date, key: Crypto.KeyObject, x5c?: X509.X509Certificate[]): Promise<string> => {
    const lote = {
        LoTE: {
            ListAndSchemeInformation: {
                LoTEVersionIdentifier: 1,
                LoTESequenceNumber: 1,
                LoTEType: 'http://uri.etsi.org/19602/LoTEType/EUPIDProvidersList',
                SchemeOperatorName: [{ lang: 'en', value: 'Test scheme operator' }],
                ListIssueDateTime: new Date(Date.now() - 60_000).toISOString(),
                NextUpdate: nextUpdate.toISOString()
            },
            TrustedEntitiesList: services.map((service, i) => ({
                TrustedEntityInformation: { TEName: [{ lang: 'en', value: service.name ?? `Entity ${i}` }] },
                TrustedEntityServices: [{
                    ServiceInformation: {
                        ServiceTypeIdentifier: service.type,
                        ServiceName: [{ lang: 'en', value: `Service ${i}` }],
                        ServiceDigitalIdentity: { X509Certificates: service.certificates.map((c) => ({ val: der(c) })) },
                        ...(service.status ? { ServiceStatus: service.status } : {})
                    }
                }]
            }))
        }
    };
    return new Jose.CompactSign(new TextEncoder().encode(JSON.stringify(lote)))
        .setProtectedHeader({ alg: key.asymmetricKeyType === 'rsa' ? 'RS256' : 'ES256', typ: 'JWT', ...(x5c ? { x5c: x5c.map(der) } : {}) })
        .sign(key);
};

/** An RSA signer certificate (trusted lists are mostly RSA-signed), self-signed. */
export const rsaSigner = async (name: string): Promise<XmlSigner> => {
    const alg = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 2048 };
    const keys = await Crypto.webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']) as Crypto.webcrypto.CryptoKeyPair;
    const certificate = await X509.X509CertificateGenerator.createSelfSigned({
        serialNumber: '01', name: `C=DE, CN=${name}`, notBefore: new Date(Date.now() - 86_400_000), notAfter: new Date(Date.now() + 365 * 86_400_000), signingAlgorithm: alg, keys: keys as never
    });
    const privateKey = Crypto.KeyObject.from(keys.privateKey);
    return { privateKey, certificate };
};

export interface Served {
    status?: number;
    body: string;
    contentType?: string;
    delayMs?: number;
}

export interface ListServer {
    /** http://127.0.0.1:<port> */
    base: string;
    /** What each path answers now; change it between fetches. */
    routes: Map<string, Served>;
    hits: Map<string, number>;
    close(): Promise<void>;
}

/** A loopback HTTP server for trust lists (and registrars: `handle` answers what routes do not). */
export const startListServer = async (handle?: (req: Http.IncomingMessage, body: string, res: Http.ServerResponse) => boolean): Promise<ListServer> => {
    const routes = new Map<string, Served>();
    const hits = new Map<string, number>();
    const sockets = new Set<Net.Socket>();
    const server = Http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
            const path = new URL(req.url ?? '/', 'http://x').pathname;
            hits.set(path, (hits.get(path) ?? 0) + 1);
            const served = routes.get(path);
            if (!served) {
                if (!handle?.(req, Buffer.concat(chunks).toString('utf8'), res)) {
                    res.writeHead(404).end();
                }
                return;
            }
            const answer = () => {
                if (!res.destroyed) {
                    res.writeHead(served.status ?? 200, { 'content-type': served.contentType ?? 'application/xml' }).end(served.body);
                }
            };
            if (served.delayMs) {
                setTimeout(answer, served.delayMs).unref();
            }
            else {
                answer();
            }
        });
    });
    server.on('connection', (socket) => {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as Net.AddressInfo;
    return {
        base: `http://127.0.0.1:${port}`,
        routes,
        hits,
        close: () => new Promise<void>((resolve) => {
            sockets.forEach((s) => s.destroy());
            server.close(() => resolve());
        })
    };
};
