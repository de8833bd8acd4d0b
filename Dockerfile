# The pgoutbox commands (relay, inbox) and the examples (producer,
# payment-consumer) in one small image; docker-compose.yml runs it.
#   docker build -t pgoutbox .
#   docker run --rm pgoutbox relay --help
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -tags nodev -trimpath -ldflags="-s -w" -o /out/ ./cmd/... ./examples/...

# busybox (static) gives the healthchecks their wget; distroless has no shell.
FROM busybox:1.36-musl AS busybox

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=busybox /bin/busybox /usr/local/bin/busybox
COPY --from=build /out/ /usr/local/bin/
USER nonroot
ENTRYPOINT []
CMD ["relay", "--help"]
