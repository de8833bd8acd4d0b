# Two images from one build:
#   docker build -t pgoutbox .                  the production image (the
#       default, last stage): relay and inbox only, on scratch, uid 65532;
#       the Helm chart runs it
#   docker build --target compose -t pgoutbox:local .
#       relay, inbox, the examples (producer, payment-consumer) and busybox
#       (the healthchecks' wget); docker-compose.yml builds and runs it
#
# Bases. Every FROM names scratch, an earlier stage, or an exact version
# pinned by the digest of its image index (test/deploy checks the version,
# CI's images job that the registry serves the digest). The digests are the
# ones docker-library/repo-info (the official images' record of Docker
# Hub) lists for these tags: golang:1.26.8-bookworm as rebuilt on
# 2026-09-19, busybox:1.37.0-musl as of 2026-08. To move to a newer build
# or tag, edit the tag and run `deploy/pin-images.sh` where docker buildx
# reaches the registry: it resolves each tag to its current digest and
# rewrites these lines (docs/security.md, "Supply chain").
FROM golang:1.26.8-bookworm@sha256:f4191582e1522dfc5980a6bdc0309a756f9697f3e7d0f199c7e26fc82ab324fd AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -tags nodev -trimpath -ldflags="-s -w" -o /out/bin/ ./cmd/relay ./cmd/inbox \
 && CGO_ENABLED=0 go build -tags nodev -trimpath -ldflags="-s -w" -o /out/examples/ ./examples/...

# busybox (static) gives the compose healthchecks their wget.
FROM busybox:1.37.0-musl@sha256:fc6dddc4c44b1bfe37f41cae8e67d1693828e8f42a91862816d7953e2c9d3f23 AS busybox

# For docker-compose only: the commands, the examples and busybox.
FROM scratch AS compose
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=busybox /bin/busybox /usr/local/bin/busybox
COPY --from=build /out/bin/ /out/examples/ /usr/local/bin/
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT []
CMD ["relay", "--help"]

# The production image: scratch plus the two static binaries, the CA roots
# (verify-full TLS to Postgres and Kafka) and an unprivileged uid (65532,
# distroless' "nonroot"). No shell, no busybox, no examples.
FROM scratch AS production
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/bin/relay /out/bin/inbox /usr/local/bin/
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT []
CMD ["relay", "--help"]
