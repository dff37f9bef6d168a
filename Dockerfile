# One image for every Quire process; compose picks the command.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bins \
 && mkdir -p /out \
 && cp target/release/quire-api target/release/quire-dispatcher \
       target/release/quire-worker target/release/quire-admin /out/

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
    poppler-utils tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd fonts-dejavu-core bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home /var/lib/quire quire \
 && mkdir -p /var/lib/quire/documents \
 && chown -R quire /var/lib/quire
COPY --from=build /out/ /usr/local/bin/
COPY config/ /etc/quire/
ENV QUIRE_CONFIG_DIR=/etc/quire \
    QUIRE_ENV=production
USER quire
WORKDIR /var/lib/quire
EXPOSE 8080
CMD ["quire-api"]
