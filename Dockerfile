# The pgoutbox commands (relay, inbox) and the examples (producer,
# payment-consumer) in one small image; docker-compose.yml runs it.
#   docker build -t pgoutbox .
#   docker run --rm pgoutbox relay --help
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -tags nodev -trimpath -ldflags="-s -w" -o /out/ ./cmd/... ./examples/...

# busybox (static) gives the healthchecks their wget.
FROM busybox:1.36.1-musl AS busybox

# Every base is pinned (test/deploy checks it): scratch plus the static
# binaries, busybox, the CA roots (verify-full TLS to Postgres and Kafka)
# and an unprivileged uid (65532, distroless' "nonroot").
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=busybox /bin/busybox /usr/local/bin/busybox
COPY --from=build /out/ /usr/local/bin/
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT []
CMD ["relay", "--help"]
