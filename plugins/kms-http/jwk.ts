/* The JWK checks moved to lib/kms/jwk (shared by every provider); kept here for callers of the http provider. */
export { privateEcP256Jwk, toEcP256PublicJwk, verifyEs256 } from '../../lib/kms/jwk';
