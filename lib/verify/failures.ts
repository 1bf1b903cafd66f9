/**
 * Verification failure codes and their display-safe messages (interface spec 7.2). The message of a coded
 * failure is exactly the one of the spec table, so it can be used as errorReason / outcome.message as is;
 * diagnostics (which check failed, certificate subjects, ...) go to `detail`, which is for logs only and never
 * part of an outcome.
 */

export type FailureCode =
    | 'signature_invalid'
    | 'no_trust_chain_to_root'
    | 'trust_chain_not_trusted'
    | 'trust_list_unavailable'
    | 'certificate_expired'
    | 'x5c_missing'
    | 'verification_error'
    | 'claim_value_mismatch';

export const FAILURE_CODES: readonly FailureCode[] = [
    'signature_invalid',
    'no_trust_chain_to_root',
    'trust_chain_not_trusted',
    'trust_list_unavailable',
    'certificate_expired',
    'x5c_missing',
    'verification_error',
    'claim_value_mismatch'
];

/** The exact messages of spec 7.2. `claim_value_mismatch` is a template: use `claimValueMismatchMessage`. */
export const FAILURE_MESSAGES: Readonly<Record<FailureCode, string>> = {
    signature_invalid: 'The credential signature is invalid.',
    no_trust_chain_to_root: 'The credential issuer does not chain to a trusted root.',
    trust_chain_not_trusted: 'The credential issuer is not in the trusted list.',
    trust_list_unavailable: 'The trusted list could not be loaded, so the credential could not be validated.',
    certificate_expired: 'The credential issuer certificate is expired or not yet valid.',
    x5c_missing: 'The credential is missing its issuer certificate chain.',
    verification_error: 'The credential could not be verified.',
    claim_value_mismatch: "Disclosed claim values do not match the requested values for credential '<id>': <paths>"
};

/** The claim_value_mismatch message: names the credential query and the claim paths, never the values. */
export const claimValueMismatchMessage = (credentialId: string, paths: string[]): string =>
    FAILURE_MESSAGES.claim_value_mismatch.replace('<id>', credentialId).replace('<paths>', paths.join(', '));

/** Prefix of the failures without a code that concern a presentation (spec 7.2, last paragraph). */
export const PRESENTATION_VALIDATION_FAILED = 'Presentation validation failed';

/**
 * A classified (code set) or unclassified (code undefined, e.g. "Presentation validation failed: ...") verification
 * failure. `message` is display-safe; `detail` is a diagnostic for logs only.
 */
export class VerificationFailure extends Error {
    constructor(readonly code: FailureCode | undefined, message: string, readonly detail?: string) {
        super(message);
        this.name = 'VerificationFailure';
    }

    /** A coded failure with the exact message of spec 7.2 and an optional diagnostic. */
    static coded(code: Exclude<FailureCode, 'claim_value_mismatch'>, detail?: string): VerificationFailure {
        return new VerificationFailure(code, FAILURE_MESSAGES[code], detail);
    }

    /** A failure without a code: "Presentation validation failed: <reason>". */
    static presentation(reason: string, detail?: string): VerificationFailure {
        return new VerificationFailure(undefined, `${PRESENTATION_VALIDATION_FAILED}: ${reason}`, detail);
    }
}

export const isVerificationFailure = (error: unknown): error is VerificationFailure => error instanceof VerificationFailure;
