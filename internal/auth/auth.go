// Package auth issues and checks API keys. A key's secret is a bearer token
// ("wr_" + 40 base32 characters, 200 bits of randomness); only its SHA-256
// is stored, so a leaked database holds no usable key. A fast hash suffices
// because the secret is random, not a password.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// TokenPrefix starts every API key secret.
const TokenPrefix = "wr_"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// Hash returns the stored form of a secret (hex SHA-256).
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewKey creates and stores a key named name. It returns the record and the
// secret, which is shown once and never again. dailyLimitMicros > 0 gives
// the key a daily spending limit (micro-dollars per UTC day) atomically with it.
func NewKey(ctx context.Context, st *store.Store, name string, dailyLimitMicros int64) (store.Key, string, error) {
	return NewKeyWithLimits(ctx, st, name, store.KeyLimits{DailyLimitMicros: dailyLimitMicros})
}

// NewKeyWithLimits is NewKey with the key's quotas too (store.KeyLimits),
// stored with it in one transaction.
func NewKeyWithLimits(ctx context.Context, st *store.Store, name string, l store.KeyLimits) (store.Key, string, error) {
	k, token, err := Generate(name)
	if err != nil {
		return store.Key{}, "", err
	}
	if err := st.InsertKeyWithLimits(ctx, k, l); err != nil {
		return store.Key{}, "", err
	}
	return k, token, nil
}

// Generate makes a key named name and its secret without storing it, for
// callers that store it in a transaction of their own (device login). The
// name must be 1 to 100 characters, not all spaces.
func Generate(name string) (store.Key, string, error) {
	if strings.TrimSpace(name) == "" {
		return store.Key{}, "", errs.New(errs.Invalid, "a key needs a name (for example \"ci\" or \"laptop\")")
	}
	if len(name) > 100 {
		return store.Key{}, "", errs.New(errs.Invalid, "key name is %d characters; the maximum is 100", len(name))
	}
	var secret [25]byte
	var id [5]byte
	_, _ = rand.Read(secret[:])
	_, _ = rand.Read(id[:])
	token := TokenPrefix + strings.ToLower(b32.EncodeToString(secret[:]))
	k := store.Key{
		ID:        "key_" + strings.ToLower(b32.EncodeToString(id[:])),
		Name:      name,
		Prefix:    token[:len(TokenPrefix)+6],
		Hash:      Hash(token),
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond), // what the store keeps
	}
	return k, token, nil
}

// Authenticate returns the live key whose secret is token, or an
// errs.Unauthorized error that says what to do.
func Authenticate(ctx context.Context, st *store.Store, token string) (store.Key, error) {
	if token == "" {
		return store.Key{}, errs.New(errs.Unauthorized, "missing API key: send it as `Authorization: Bearer wr_...` (create one with `withruntime keys create NAME`)")
	}
	k, err := st.KeyByHash(ctx, Hash(token))
	if errors.Is(err, store.ErrNotFound) {
		return store.Key{}, errs.New(errs.Unauthorized, "unknown API key %s...; check WITHRUNTIME_API_KEY", safePrefix(token))
	}
	if err != nil {
		return store.Key{}, fmt.Errorf("authenticate: %w", err)
	}
	if k.RevokedAt != nil {
		return store.Key{}, errs.New(errs.Unauthorized, "API key %s (%s) was revoked at %s; create a new one with `withruntime keys create`",
			k.ID, k.Name, k.RevokedAt.Format(time.RFC3339))
	}
	return k, nil
}

func safePrefix(token string) string {
	if len(token) > 9 {
		return token[:9]
	}
	return ""
}
