# syntax=docker/dockerfile:1
# Hallmark service image: docs/deployment.md. Build: docker build -t hallmark .
ARG NODE_VERSION=22

# --- build: compile TypeScript and the native modules (better-sqlite3, pkcs11js), then keep production deps only
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /src
# Native modules fall back to compiling when no prebuilt binary matches the platform.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 make g++ \
    && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# Scripts off: "prepare" would compile before the sources are here; the native modules are built explicitly.
RUN npm ci --ignore-scripts --no-audit --no-fund \
    && npm rebuild better-sqlite3 pkcs11js
COPY tsconfig.json tsconfig.build.json index.ts ./
COPY bin ./bin
COPY lib ./lib
COPY manifests ./manifests
COPY plugins ./plugins
COPY resources ./resources
RUN npx tsc -p tsconfig.build.json \
    && npm prune --omit=dev --no-audit --no-fund

# --- runtime: the compiled service, production node_modules, non-root
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    PORT=3000 \
    HOST=0.0.0.0 \
    FOLDER=/app/config \
    CONFIG_FOLDER=/app/config/config
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# FOLDER holds the SQLite database (service.db); CONFIG_FOLDER the configuration imported at start (mount it
# read-only). Both belong to the unprivileged "node" user (uid 1000) of the base image.
RUN mkdir -p /app/config/config && chown -R node:node /app/config
USER node
EXPOSE 3000
VOLUME ["/app/config"]
# /health answers 200 while the database is reachable, 503 when not. No curl in the slim image: node asks.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form: node is PID 1 and gets SIGTERM itself; the service finishes in-flight requests (10 s) and exits 0.
# In cluster mode (WORKERS, default every core) the primary stops its workers the same way and reaps them.
STOPSIGNAL SIGTERM
CMD ["node", "--max-semi-space-size=4", "dist/bin/hallmark.js", "start"]
