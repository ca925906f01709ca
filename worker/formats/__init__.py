"""Registry-framed records (docs/formats.md): the schema registry's HTTP client, the schemas cached by id, and
the payload codecs (Avro with fastavro, JSON Schema with orjson). The worker reads with them; the producer side
writes with them. No torch, no Kafka client."""
