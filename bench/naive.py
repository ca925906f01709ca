"""The naive baseline: the loop a user writes first, one request at a time.

``python -m bench.naive --bootstrap-servers B --requests-topic T --reply-topic R --group G --model M
[--torch-threads N]`` runs until SIGTERM. For each record: decode the JSON,
run the model on a batch of one, send the reply and wait for the broker's
acknowledgement (``acks=all``, idempotent), commit that record's offset.
Same model and reply as streamscore; no batching, no dedup.
"""

from __future__ import annotations

import orjson
import torch
from kafka import OffsetAndMetadata, TopicPartition

from bench.plain_kafka import arguments, log_event, reliable_producer, stop_flag, subscribed_consumer
from worker.models import load_model
from worker.models.base import eval_mode
from worker.models.spec import call_module


def main() -> int:
    parser = arguments("One request at a time: decode, model, send, commit (the naive baseline).")
    parser.add_argument("--model", required=True)
    parser.add_argument("--torch-threads", type=int, default=0)
    args = parser.parse_args()
    stop = stop_flag()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    model = load_model(args.model)
    module = eval_mode(model.module)
    consumer = subscribed_consumer(args)
    producer = reliable_producer(args, linger_ms=0)
    replied = 0
    while not stop.is_set():
        for records in consumer.poll(timeout_ms=200, max_records=1).values():
            for record in records:
                request = orjson.loads(record.value)
                with torch.inference_mode():
                    output = model.split(call_module(module, model.collate([model.prepare(request["inputs"])])))[0]
                reply = {"id": request["id"], "status": "ok", "outputs": output, "model": model.name,
                         "model_version": model.version}
                producer.send(args.reply_topic, key=record.key, value=orjson.dumps(reply)).get()
                consumer.commit({TopicPartition(record.topic, record.partition):
                                 OffsetAndMetadata(record.offset + 1, "", -1)})
                replied += 1
    consumer.close(autocommit=False)
    producer.close()
    log_event("loop_stopped", replied=replied)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
