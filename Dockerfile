# syntax=docker/dockerfile:1
# Card issuing gateway. Build: docker build -t card-gateway .
# Run: mount the environment's config, credentials and secrets, e.g.
#   docker run -v /etc/card-gateway:/etc/card-gateway:ro -e REDIS_PASSWORD -e CARD_RECORD_KEY \
#     -p 8443:8443 card-gateway --config /etc/card-gateway/gateway.yaml
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the package's `prepare` builds at install, before the sources are copied here.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

FROM ${NODE_IMAGE} AS production-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE}
# The commit built, for `--version` and gateway_build_info (the image has no .git):
#   docker build --build-arg GATEWAY_COMMIT=$(git rev-parse --short=12 HEAD) -t card-gateway .
ARG GATEWAY_COMMIT=unknown
ENV NODE_ENV=production GATEWAY_COMMIT=${GATEWAY_COMMIT}
WORKDIR /app
COPY --from=production-deps --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist/src ./dist/src
COPY --chown=root:root package.json ./
COPY --chown=root:root config ./config
# The package's `bin` commands on the PATH, as `npm install --global` would link them:
#   docker run --rm -i --entrypoint card-gateway-hash-password card-gateway
RUN node -e 'const fs = require("node:fs"); for (const [name, file] of Object.entries(require("./package.json").bin)) { fs.chmodSync(file, 0o755); fs.symlinkSync(`/app/${file}`, `/usr/local/bin/${name}`); }'
# Code and config are root-owned and read-only to the service user; it writes only the audit log.
RUN mkdir -p /var/log/card-gateway && chown node:node /var/log/card-gateway
USER node
EXPOSE 8443 8442
# The admin listener answers /healthz while the process serves. Set HEALTHCHECK_URL when the
# config puts listeners.admin elsewhere than 127.0.0.1:8442.
ENV HEALTHCHECK_URL=http://127.0.0.1:8442/healthz
HEALTHCHECK --interval=15s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch(process.env.HEALTHCHECK_URL).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/src/main.js"]
CMD ["--config", "/etc/card-gateway/gateway.yaml"]
