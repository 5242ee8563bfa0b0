# One image for every subcommand: `switchyard controller`, `switchyard proxy`, ...
# Build: make docker-build IMG=registry.example/switchyard:TAG
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/switchyard-io/switchyard/internal/version.Version=${VERSION}" \
    -o /out/switchyard ./cmd/switchyard

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/switchyard /switchyard
USER 65532:65532
ENTRYPOINT ["/switchyard"]
