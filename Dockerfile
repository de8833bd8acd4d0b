# Two images from one build:
#   docker build -t pgoutbox .                  the production image (the
#       default, last stage): relay and inbox only, on scratch, uid 65532;
#       the Helm chart runs it
#   docker build --target compose -t pgoutbox:local .
#       relay, inbox, the examples (producer, payment-consumer) and busybox
#       (the healthchecks' wget); docker-compose.yml builds and runs it
#
# Bases. Every FROM names scratch, an earlier stage, or an exact version
# (test/deploy checks it). Pinning by digest as well (image:tag@sha256:…)
# needs the registry, which the machines that wrote this file cannot reach:
# run `deploy/pin-images.sh` where docker buildx reaches Docker Hub; it
# resolves each tag to its current digest and rewrites the FROM lines. CI's
# `images` job runs `deploy/pin-images.sh --check`, which fails while a base
# has no digest or names one the registry does not serve (docs/security.md,
# "Supply chain").
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -tags nodev -trimpath -ldflags="-s -w" -o /out/bin/ ./cmd/relay ./cmd/inbox \
 && CGO_ENABLED=0 go build -tags nodev -trimpath -ldflags="-s -w" -o /out/examples/ ./examples/...

# busybox (static) gives the compose healthchecks their wget.
FROM busybox:1.36.1-musl AS busybox

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
