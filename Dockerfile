# syntax=docker/dockerfile:1
# Small, non-root image that runs respool on Node.js 24 LTS (Node 20 is past its end of life;
# the tests run on Node 20 and 24, see package.json "engines").
#
#   docker build -t respool .
#   docker run --rm -p 6380:6380 -p 9121:9121 respool --upstream valkey:6379
#   docker run --rm -p 6380:6380 -p 9121:9121 -e RESPOOL_UPSTREAMS=valkey:6379 respool
#   docker run --rm -p 6380:6380 -p 9121:9121 -v $PWD/respool.yaml:/etc/respool/respool.yaml:ro \
#     respool --config /etc/respool/respool.yaml
#
# Inside the image respool listens on 0.0.0.0:6380 (clients) and 0.0.0.0:9121 (admin HTTP:
# /metrics, /healthz, /readyz), set by RESPOOL_LISTEN and RESPOOL_ADMIN below (every setting
# can come from a RESPOOL_<PATH> variable, see `respool --help`). Precedence is flags >
# environment > config file, so `-e RESPOOL_LISTEN=...` or `--listen ...` changes them, and a
# mounted config file's `listen` and `admin` do not (set those two in the environment or as
# flags). The upstream is required: `--upstream host:port`, RESPOOL_UPSTREAMS, or a config
# file's `upstreams`. The HEALTHCHECK asks the admin port's /healthz; with the admin server off
# or on another port, run with `--no-healthcheck` (or a --health-cmd of your own).

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts/bundle.mjs ./scripts/
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    RESPOOL_LISTEN=0.0.0.0:6380 \
    RESPOOL_ADMIN=0.0.0.0:9121
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY bin ./bin
COPY config ./config
# The image's built-in unprivileged user `node`, by number (uid/gid 1000) so that Kubernetes'
# runAsNonRoot can verify it is not root. respool needs no privileges (ports > 1024) and writes
# no files (logs go to stdout), so the root filesystem can be mounted read-only.
USER 1000:1000
EXPOSE 6380 9121
# curl is not in slim images: Node itself asks the admin server's /healthz (liveness: the event
# loop answers). /readyz (topology known, every slot's primary reachable) is for load
# balancers and Kubernetes readiness, not for restarting the container.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "require('node:http').get('http://127.0.0.1:9121/healthz', (r) => process.exit(r.statusCode === 200 ? 0 : 1)).on('error', () => process.exit(1)).setTimeout(2000, () => process.exit(1))"]
ENTRYPOINT ["node", "/app/bin/respool.js"]
CMD []
