// A stand-in for "a JVM service the project did not write": it writes streamscore requests and reads
// records with the stock Apache Kafka Java client, so the conformance tests can check that the worker
// understands what the reference client produces (every codec, transactions, null keys, headers) and
// that what the worker writes reads back cleanly in that client.
//
// One file, no package and nothing but the JDK and kafka-clients, so that it runs without a build:
//   java -cp "$(deploy/local/services.sh jars)/*" tests/conformance/Interop.java produce --bootstrap ...
// and compiles the same way (tests/conformance/java_client.py caches a compiled copy: a JVM that
// compiles the source on every start costs a second or so a call).
//
// stdout carries JSON lines only, one per record; diagnostics go to stderr. Exit status: 0 done,
// 1 a Kafka or I/O failure, 2 a bad command line.

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Interop {

    /** The width of the default model's input vector: CHURN_FEATURES in worker/core/samples.py. */
    static final int CHURN_INPUTS = 16;
    /** Records per transaction with --transactional-id: several transactions from a modest --count. */
    static final int RECORDS_PER_TRANSACTION = 10;
    static final Set<String> CODECS = Set.of("none", "gzip", "snappy", "lz4", "zstd");
    static final Set<String> ISOLATIONS = Set.of("read_committed", "read_uncommitted");

    /** Thrown for a bad command line: reported with the usage text and exit status 2. */
    static final class UsageError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    static final String USAGE = String.join("\n",
            "usage: Interop produce --bootstrap B --topic T --count N --id-prefix P --codec none|gzip|snappy|lz4|zstd",
            "                       [--null-keys] [--transactional-id X [--abort-every K]] [--traceparent] [--partition N]",
            "       Interop consume --bootstrap B --topic T --expect N --timeout-s S",
            "                       --isolation read_committed|read_uncommitted [--group G]");

    public static void main(String[] args) {
        // The JSON lines need a stream nobody else writes to: the client's logging (log4j's default
        // console appender is stdout) or any library's stray println would corrupt them. Keep the real
        // stdout to ourselves and point System.out at stderr before any Kafka class loads.
        PrintStream json = new PrintStream(
                new BufferedOutputStream(new FileOutputStream(FileDescriptor.out)), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        // Only warnings and errors from the client: its INFO lines (every config, every rebalance) bury
        // the one line that explains a failure. Without a log4j2 configuration file on the class path,
        // log4j's default configuration takes its level from this property.
        if (System.getProperty("org.apache.logging.log4j.level") == null) {
            System.setProperty("org.apache.logging.log4j.level", "WARN");
        }

        if (Arrays.asList(args).contains("--help") || Arrays.asList(args).contains("-h")) {
            System.err.println(USAGE);  // stdout carries the JSON lines only
            System.exit(0);
        }
        int status;
        try {
            Map<String, String> flags = parseFlags(args);
            String command = args.length > 0 ? args[0] : "";
            switch (command) {
                case "produce" -> produce(flags, json);
                case "consume" -> consume(flags, json);
                default -> throw new UsageError(command.isEmpty() ? "no command" : "unknown command: " + command);
            }
            json.flush();
            // PrintStream swallows I/O errors: a reader that went away must not look like success.
            status = json.checkError() ? fail("writing stdout failed (closed pipe?)", null) : 0;
        } catch (UsageError e) {
            System.err.println("interop: " + e.getMessage());
            System.err.println(USAGE);
            status = 2;
        } catch (Exception e) {
            json.flush();
            status = fail((args.length > 0 ? args[0] : "interop") + " failed", e);
        }
        // The client's threads are closed by now, but a stuck one must not keep the JVM alive.
        System.exit(status);
    }

    static int fail(String what, Throwable cause) {
        Throwable root = cause;
        while (root != null && (root instanceof ExecutionException) && root.getCause() != null) {
            root = root.getCause();
        }
        System.err.println("interop: " + what + (root == null ? "" : ": " + root));
        if (root != null) {
            root.printStackTrace(System.err);
        }
        return 1;
    }

    // ---------------------------------------------------------------------------------------------
    // produce

    static void produce(Map<String, String> flags, PrintStream json) throws Exception {
        String bootstrap = required(flags, "bootstrap");
        String topic = required(flags, "topic");
        int count = intFlag(flags, "count", null);
        String idPrefix = required(flags, "id-prefix");
        String codec = choice(flags, "codec", CODECS);
        boolean nullKeys = flags.containsKey("null-keys");
        boolean withTraceparent = flags.containsKey("traceparent");
        String transactionalId = flags.get("transactional-id");
        int abortEvery = intFlag(flags, "abort-every", 0);
        // -1: the client's partitioner chooses (by key; sticky batches for null keys).
        int partition = intFlag(flags, "partition", -1);
        if (transactionalId == null && flags.containsKey("abort-every")) {
            throw new UsageError("--abort-every needs --transactional-id");
        }
        if (count < 0 || abortEvery < 0) {
            throw new UsageError("--count and --abort-every must not be negative");
        }

        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.CLIENT_ID_CONFIG, "interop-java-producer");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // Fail within the caller's patience (java_client.py waits two minutes) rather than the
        // client's defaults (one minute blocked on metadata, two for a delivery), with the reason.
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        if (transactionalId != null) {
            config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        }

        String traceSeed = String.format("%016x", fnv1a64(idPrefix));
        try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
            if (transactionalId == null) {
                List<Written> written = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    written.add(send(producer, topic, partition, idPrefix, i, nullKeys, withTraceparent ? traceSeed : null));
                }
                producer.flush();
                for (Written w : written) {
                    w.ack.get();  // throws the delivery failure, if any
                    printProduced(json, w, true);
                }
            } else {
                producer.initTransactions();
                int transaction = 0;
                for (int start = 0; start < count; start += RECORDS_PER_TRANSACTION, transaction++) {
                    boolean abort = abortEvery > 0 && (transaction + 1) % abortEvery == 0;
                    producer.beginTransaction();
                    List<Written> written = new ArrayList<>();
                    for (int i = start; i < Math.min(count, start + RECORDS_PER_TRANSACTION); i++) {
                        written.add(send(producer, topic, partition, idPrefix, i, nullKeys, withTraceparent ? traceSeed : null));
                    }
                    if (abort) {
                        // abortTransaction drops batches still in the client's buffer; flush first so the
                        // aborted records do reach the log, where read_uncommitted sees them and
                        // read_committed must skip them, which is what a test of isolation needs.
                        producer.flush();
                        for (Written w : written) {
                            w.ack.get();
                        }
                        producer.abortTransaction();
                    } else {
                        producer.commitTransaction();  // flushes, and throws if any send in it failed
                        for (Written w : written) {
                            w.ack.get();
                        }
                    }
                    for (Written w : written) {
                        printProduced(json, w, !abort);
                    }
                    json.flush();
                }
            }
        }
    }

    /** One request handed to the producer: its id, traceparent (or null) and pending acknowledgement. */
    record Written(String id, String traceparent, Future<RecordMetadata> ack) {
    }

    static Written send(KafkaProducer<byte[], byte[]> producer, String topic, int partition, String idPrefix, int index,
                        boolean nullKeys, String traceSeed) {
        String id = idPrefix + "-" + index;
        StringBuilder value = new StringBuilder("{\"id\":");
        appendString(value, id);
        value.append(",\"inputs\":[");
        for (int j = 0; j < CHURN_INPUTS; j++) {
            // Varied but reproducible features in [0, 1), in the form a JSON reader parses exactly.
            double feature = ((index * 7 + j * 13) % 100) / 100.0;
            value.append(j == 0 ? "" : ",").append(String.format(Locale.ROOT, "%.2f", feature));
        }
        value.append("]}");
        byte[] key = nullKeys ? null : id.getBytes(StandardCharsets.UTF_8);
        ProducerRecord<byte[], byte[]> record =
                new ProducerRecord<>(topic, partition < 0 ? null : partition, key,
                        value.toString().getBytes(StandardCharsets.UTF_8));
        // A header the worker has never heard of: it must be ignored, not copied and not fatal.
        record.headers().add("x-origin", "interop-java".getBytes(StandardCharsets.UTF_8));
        String traceparent = null;
        if (traceSeed != null) {
            traceparent = traceparent(traceSeed, index);
            record.headers().add("traceparent", traceparent.getBytes(StandardCharsets.UTF_8));
        }
        return new Written(id, traceparent, producer.send(record));
    }

    /**
     * A valid W3C traceparent, distinct per record and per id prefix: trace id = a hash of the prefix
     * then index + 1, span id = index + 1 (never all zeros, which the W3C format forbids), sampled.
     */
    static String traceparent(String traceSeed, int index) {
        return String.format("00-%s%016x-%016x-01", traceSeed, index + 1L, index + 1L);
    }

    static long fnv1a64(String text) {
        long hash = 0xcbf29ce484222325L;
        for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
            hash = (hash ^ (b & 0xff)) * 0x100000001b3L;
        }
        return hash;
    }

    static void printProduced(PrintStream json, Written w, boolean committed) {
        StringBuilder line = new StringBuilder("{\"id\":");
        appendString(line, w.id());
        line.append(",\"committed\":").append(committed).append(",\"traceparent\":");
        appendString(line, w.traceparent());
        json.print(line.append("}\n"));
    }

    // ---------------------------------------------------------------------------------------------
    // consume

    static void consume(Map<String, String> flags, PrintStream json) {
        String bootstrap = required(flags, "bootstrap");
        String topic = required(flags, "topic");
        int expect = intFlag(flags, "expect", null);
        double timeoutS = doubleFlag(flags, "timeout-s");
        String isolation = choice(flags, "isolation", ISOLATIONS);
        String group = flags.getOrDefault("group", "interop-java-" + UUID.randomUUID());

        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "interop-java-consumer");
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);

        long deadline = System.nanoTime() + (long) (timeoutS * 1e9);
        int seen = 0;
        boolean everAssigned = false;
        try (KafkaConsumer<byte[], byte[]> consumer =
                     new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            // Every record of the last poll is printed even past --expect: a duplicate or a record that
            // should not be there is what the caller is looking for.
            while (seen < expect) {
                long leftMs = (deadline - System.nanoTime()) / 1_000_000;
                if (leftMs <= 0) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(Math.min(leftMs, 500)))) {
                    printConsumed(json, record);
                    seen++;
                }
                json.flush();
                everAssigned |= !consumer.assignment().isEmpty();
            }
        }
        // The client retries an unreachable broker quietly until the deadline; without this, "broker
        // down" would read as "no records" (exit 0), which a test counting records would misjudge.
        if (!everAssigned && seen < expect) {
            throw new IllegalStateException("no partition of " + topic + " was assigned within " + timeoutS
                    + " s: is the broker at " + bootstrap + " up?");
        }
        if (seen < expect) {
            System.err.printf("interop: consume: %d of %d records within %s s%n", seen, expect, timeoutS);
        }
    }

    static void printConsumed(PrintStream json, ConsumerRecord<byte[], byte[]> record) {
        StringBuilder line = new StringBuilder("{\"partition\":").append(record.partition())
                .append(",\"offset\":").append(record.offset()).append(",\"key\":");
        appendString(line, utf8(record.key()));
        line.append(",\"value\":");
        appendString(line, utf8(record.value()));
        line.append(",\"headers\":{");
        // A repeated header name keeps its last value, as a JSON object can hold only one.
        Map<String, String> headers = new LinkedHashMap<>();
        for (Header header : record.headers()) {
            headers.remove(header.key());
            headers.put(header.key(), utf8(header.value()));
        }
        boolean first = true;
        for (Map.Entry<String, String> header : headers.entrySet()) {
            line.append(first ? "" : ",");
            appendString(line, header.getKey());
            line.append(':');
            appendString(line, header.getValue());
            first = false;
        }
        json.print(line.append("}}\n"));
    }

    static String utf8(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }

    // ---------------------------------------------------------------------------------------------
    // JSON and the command line

    /** Appends text as a JSON string (or null), escaping what RFC 8259 requires. */
    static void appendString(StringBuilder out, String text) {
        if (text == null) {
            out.append("null");
            return;
        }
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    static final Set<String> SWITCHES = Set.of("null-keys", "traceparent");
    static final Set<String> VALUED = Set.of("bootstrap", "topic", "count", "id-prefix", "codec", "partition",
            "transactional-id", "abort-every", "expect", "timeout-s", "isolation", "group");

    /** --name value pairs and bare --switches after the command; anything else is a usage error. */
    static Map<String, String> parseFlags(String[] args) {
        Map<String, String> flags = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            String arg = args[i];
            String name = arg.startsWith("--") ? arg.substring(2) : null;
            if (name != null && SWITCHES.contains(name)) {
                flags.put(name, "");
            } else if (name != null && VALUED.contains(name)) {
                if (i + 1 >= args.length) {
                    throw new UsageError(arg + " needs a value");
                }
                flags.put(name, args[++i]);
            } else {
                throw new UsageError("unexpected argument: " + arg);
            }
        }
        return flags;
    }

    static String required(Map<String, String> flags, String name) {
        String value = flags.get(name);
        if (value == null || value.isEmpty()) {
            throw new UsageError("--" + name + " is required");
        }
        return value;
    }

    static int intFlag(Map<String, String> flags, String name, Integer fallback) {
        String value = fallback == null ? required(flags, name) : flags.get(name);
        if (value == null) {
            return fallback;
        }
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException e) {
            throw new UsageError("--" + name + " wants an integer, not " + value);
        }
    }

    static double doubleFlag(Map<String, String> flags, String name) {
        String value = required(flags, name);
        try {
            double parsed = Double.parseDouble(value);
            if (!(parsed >= 0) || Double.isInfinite(parsed)) {
                throw new NumberFormatException();
            }
            return parsed;
        } catch (NumberFormatException e) {
            throw new UsageError("--" + name + " wants a number of seconds, not " + value);
        }
    }

    static String choice(Map<String, String> flags, String name, Set<String> allowed) {
        String value = required(flags, name);
        if (!allowed.contains(value)) {
            throw new UsageError("--" + name + " is one of " + new TreeSet<>(allowed) + ", not " + value);
        }
        return value;
    }
}
