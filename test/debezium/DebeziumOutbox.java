// DebeziumOutbox runs Debezium's embedded engine with the Postgres connector
// and the Outbox Event Router, and writes each routed record to Kafka, as
// Kafka Connect would: the test of docs/migrate-from-debezium.md runs it
// against the test's Postgres and Apache Kafka (test/e2e). Run with java's
// source launcher, the jars of pom.xml on the class path:
//
//   java -cp 'libs/*' DebeziumOutbox.java engine.properties bootstrap
//
// engine.properties is the engine's configuration (connector, slot,
// publication, offsets, transforms); bootstrap the Kafka brokers. It prints
// "STARTED" when the connector task runs, "PUBLISHED <n>" after each batch
// Kafka acknowledged, and stops gracefully (committing offsets) on SIGTERM.
import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import java.io.FileReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;

public class DebeziumOutbox {
    public static void main(String[] args) throws Exception {
        Properties engineProps = new Properties();
        try (FileReader r = new FileReader(args[0], StandardCharsets.UTF_8)) {
            engineProps.load(r);
        }
        Properties producerProps = new Properties();
        producerProps.put("bootstrap.servers", args[1]);
        producerProps.put("acks", "all");
        producerProps.put("enable.idempotence", "true");
        producerProps.put("linger.ms", "0");
        // Kafka Connect's default partitioner: murmur2 of the key bytes.
        KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer());

        CountDownLatch done = new CountDownLatch(1);
        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                .using(engineProps)
                .using(new DebeziumEngine.ConnectorCallback() {
                    @Override
                    public void taskStarted() {
                        System.out.println("STARTED");
                        System.out.flush();
                    }
                })
                .using((success, message, error) -> {
                    if (!success) {
                        System.err.println("engine stopped: " + message);
                        if (error != null) {
                            error.printStackTrace();
                        }
                    }
                    done.countDown();
                })
                .notifying((List<RecordChangeEvent<SourceRecord>> events, DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer) -> {
                    List<Future<RecordMetadata>> sent = new ArrayList<>();
                    for (RecordChangeEvent<SourceRecord> ev : events) {
                        SourceRecord r = ev.record();
                        if (r.topic() == null || r.value() == null && r.key() == null) {
                            continue; // nothing the router routed
                        }
                        ProducerRecord<byte[], byte[]> pr = new ProducerRecord<>(r.topic(), null, r.timestamp(),
                                bytes(r.key()), bytes(r.value()));
                        for (Header h : r.headers()) {
                            pr.headers().add(h.key(), bytes(h.value()));
                        }
                        sent.add(producer.send(pr));
                    }
                    for (Future<RecordMetadata> f : sent) {
                        try {
                            f.get();
                        } catch (Exception e) {
                            throw new InterruptedException("kafka: " + e);
                        }
                    }
                    for (RecordChangeEvent<SourceRecord> ev : events) {
                        committer.markProcessed(ev);
                    }
                    committer.markBatchFinished();
                    if (!sent.isEmpty()) {
                        System.out.println("PUBLISHED " + sent.size());
                        System.out.flush();
                    }
                })
                .build();

        ExecutorService exec = Executors.newSingleThreadExecutor();
        exec.execute(engine);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                engine.close();
                done.await();
                producer.close();
            } catch (Exception e) {
                e.printStackTrace();
            }
            System.out.println("STOPPED");
            System.out.flush();
        }));
        done.await();
        exec.shutdown();
    }

    // bytes is a Connect value as StringConverter writes it: its text, UTF-8.
    static byte[] bytes(Object v) {
        if (v == null) {
            return null;
        }
        if (v instanceof byte[] b) {
            return b;
        }
        return v.toString().getBytes(StandardCharsets.UTF_8);
    }
}
