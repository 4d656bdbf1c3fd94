#!/usr/bin/env bash
# Makes everything the compose sandbox needs that must not be in git, into deploy/compose/state/
# (or the folder given as $1):
#
#   ca/ca.crt, ca/ca.key              a sandbox CA (trust ca.crt in curl: --cacert)
#   secrets/gateway/                  the gateway's files, referenced by config/gateway.yaml:
#     tls.crt, tls.key                  API listener certificate (localhost, 127.0.0.1, gateway-a, gateway-b)
#     signing-sbx-compose-1.key         Ed25519 token signing key (PKCS#8)
#     card-record-sbx-card-1.key        card-record key: 32 random bytes, 64 hex digits (D18, D37)
#     connector-ca.crt                  CA the connector's certificate is checked against
#     connector-client.crt, .key        client certificate for mutual TLS to the connector
#     redis-password                    the Redis password, as a file (D50)
#   secrets/connector/                the sandbox connector's files:
#     tls.crt, tls.key                  its server certificate (connector, localhost, 127.0.0.1)
#     client-ca.crt                     CA whose client certificates it accepts
#   gateway.env                       REDIS_PASSWORD, the same password, for Redis's requirepass
#   credentials/credentials.yaml      one active sandbox credential, `sandbox-demo`
#   sandbox-demo.password             its password (also printed once)
#
# Files that exist are kept, so running it again changes nothing; delete a file to make a new
# one (the rotation runbooks in docs/runbooks/ say when and how). Needs openssl, and Node.js
# with this repository's dependencies installed (the password hash is `npm run hash-password`;
# set HASH_PASSWORD_COMMAND to use another command that reads a password on stdin and prints
# the hash line).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
state="${1:-$here/state}"

# Everything made here is for this user only; the compose service secrets-init hands the
# files to the containers' users.
umask 077
mkdir -p "$state/ca" "$state/secrets/gateway" "$state/secrets/connector" "$state/credentials" "$state/tmp"
trap 'rm -rf "$state/tmp"' EXIT
made=()

hash_password() {
  if [[ -n "${HASH_PASSWORD_COMMAND:-}" ]]; then
    bash -c "$HASH_PASSWORD_COMMAND"
  else
    (cd "$repo" && npm run --silent hash-password)
  fi
}

ec_key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

# issue KEY CRT COMMON_NAME EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
issue() {
  local key="$1" crt="$2" cn="$3" eku="$4" san="${5:-}"
  [[ -f "$crt" && -f "$key" ]] && return 0
  ec_key "$key"
  openssl req -new -key "$key" -subj "/CN=$cn" -out "$state/tmp/req.csr"
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature"
    echo "extendedKeyUsage = $eku"
    [[ -n "$san" ]] && echo "subjectAltName = $san"
  } > "$state/tmp/ext.cnf"
  # 397 days: the longest validity clients accept for a server certificate.
  openssl x509 -req -in "$state/tmp/req.csr" -CA "$state/ca/ca.crt" -CAkey "$state/ca/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 397 -sha256 -extfile "$state/tmp/ext.cnf" -out "$crt" 2>/dev/null
  made+=("$crt")
}

if [[ ! -f "$state/ca/ca.key" || ! -f "$state/ca/ca.crt" ]]; then
  ec_key "$state/ca/ca.key"
  openssl req -x509 -new -key "$state/ca/ca.key" -subj "/CN=card-gateway sandbox CA" -days 1825 -sha256 \
    -addext "basicConstraints = critical, CA:TRUE, pathlen:0" \
    -addext "keyUsage = critical, keyCertSign, cRLSign" -out "$state/ca/ca.crt"
  made+=("$state/ca/ca.crt")
  # Certificates of an earlier CA would no longer verify: make them again under this one.
  rm -f "$state/secrets/gateway/tls.crt" "$state/secrets/gateway/connector-client.crt" "$state/secrets/connector/tls.crt"
fi

gw="$state/secrets/gateway"
cn="$state/secrets/connector"
issue "$gw/tls.key" "$gw/tls.crt" localhost serverAuth "DNS:localhost, DNS:gateway-a, DNS:gateway-b, IP:127.0.0.1"
issue "$gw/connector-client.key" "$gw/connector-client.crt" card-gateway-sandbox clientAuth
# `connector` in the compose stack; localhost and 127.0.0.1 for `npm run connector` on this host
# (docs/connector-contract.md, "Running it").
issue "$cn/tls.key" "$cn/tls.crt" connector serverAuth "DNS:connector, DNS:localhost, IP:127.0.0.1"
cp "$state/ca/ca.crt" "$gw/connector-ca.crt"
cp "$state/ca/ca.crt" "$cn/client-ca.crt"

if [[ ! -f "$gw/signing-sbx-compose-1.key" ]]; then
  openssl genpkey -algorithm ed25519 -out "$gw/signing-sbx-compose-1.key"
  made+=("$gw/signing-sbx-compose-1.key")
fi

if [[ ! -f "$gw/card-record-sbx-card-1.key" ]]; then
  openssl rand -hex 32 | tr -d '\n' > "$gw/card-record-sbx-card-1.key"
  made+=("$gw/card-record-sbx-card-1.key")
fi

if [[ ! -f "$state/gateway.env" ]]; then
  printf 'REDIS_PASSWORD=%s\n' "$(openssl rand -hex 24)" > "$state/gateway.env"
  made+=("$state/gateway.env")
fi
# The gateways read the password from a file (D50), Redis from gateway.env: one password, two
# shapes. Made from gateway.env, so a state folder from before keeps its password.
if [[ ! -f "$gw/redis-password" ]]; then
  sed -n 's/^REDIS_PASSWORD=//p' "$state/gateway.env" | tr -d '\n' > "$gw/redis-password"
  made+=("$gw/redis-password")
fi

if [[ ! -f "$state/credentials/credentials.yaml" ]]; then
  password="$(openssl rand -base64 18 | tr '+/' '-_')"
  # The password goes through stdin, never argv (other users can read argv in ps).
  hash="$(printf '%s\n' "$password" | hash_password)"
  cat > "$state/credentials/credentials.yaml" <<EOF
# Sandbox credentials (docs/runbooks/credentials.md). Changes apply without restart.
credentials:
  - id: cred-sandbox-demo-01
    username: sandbox-demo
    passwordHash: "$hash"
    issuingAccount: acct-sbx-eu-001
    permissions: [cards:create, cards:reveal, cards:read, cards:update]
    addressRanges: []
    active: true
EOF
  printf '%s\n' "$password" > "$state/sandbox-demo.password"
  made+=("$state/credentials/credentials.yaml")
  echo "sandbox credential: sandbox-demo / $password (kept in $state/sandbox-demo.password)"
fi

# The gateway reads the credentials file as its own user: password hashes, not keys.
chmod 0755 "$state/credentials"
chmod 0644 "$state/credentials/credentials.yaml"

if [[ ${#made[@]} -eq 0 ]]; then
  echo "nothing to make: everything is in $state"
else
  printf 'made %s\n' "${made[@]}"
fi
