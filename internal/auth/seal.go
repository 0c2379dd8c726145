package auth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
)

// requestKeyCtx is the context key under which Middleware keeps the key of a request
// that passed its checks.
type requestKeyCtx struct{}

// withRequestKey returns r carrying key, the key that Seal seals its answer's secrets with.
func withRequestKey(r *http.Request, key []byte) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), requestKeyCtx{}, key))
}

// BearerKey is the key of a request that carries the token itself (Bearer): derived from
// the token, as a session key is, so that Seal works for it too. Whoever sees such a
// request has the token anyway.
func BearerKey(token string) []byte {
	return mac([]byte(token), labelBearer)
}

// ErrNotSealable is Seal's error for a request that passed no check of Middleware: it has
// no key to seal with.
var ErrNotSealable = errors.New("the request has no key to seal its answer with: it did not pass the token's checks")

// Seal seals secret to the request of ctx, which passed Middleware: with AES-256-GCM
// under a key derived from its session's key (SessionKey), or from BearerKey for a
// request with the token itself. Only the client that holds that key can open it
// (OpenSealed); a relay that sees the answer cannot. The result is unpadded base64url.
func Seal(ctx context.Context, secret string) (string, error) {
	key, ok := ctx.Value(requestKeyCtx{}).([]byte)
	if !ok {
		return "", ErrNotSealable
	}
	aead := sealAEAD(key)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(secret), []byte(labelSeal))), nil
}

// OpenSealed opens what Seal sealed to a request whose key is key (its session's
// SessionKey, or BearerKey).
func OpenSealed(key []byte, sealed string) (string, error) {
	data, err := base64.RawURLEncoding.DecodeString(sealed)
	aead := sealAEAD(key)
	if err != nil || len(data) < aead.NonceSize() {
		return "", errors.New("the sealed answer is malformed")
	}
	plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(labelSeal))
	if err != nil {
		return "", errors.New("the sealed answer does not open with this session's key: it was sealed to another, or changed on the way")
	}
	return string(plain), nil
}

// sealAEAD returns the AES-256-GCM of a request's key.
func sealAEAD(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(mac(key, labelSeal)) // 32 bytes: AES-256
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}
