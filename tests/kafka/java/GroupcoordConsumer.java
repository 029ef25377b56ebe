import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.StringJoiner;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One Kafka Java consumer in a group, for tests/kafka/test_java_consumer.py.
 *
 * <p>Usage: {@code GroupcoordConsumer BOOTSTRAP GROUP TOPIC ASSIGNOR OWNED BASE PARTITIONS TIMEOUT_MS
 * [PROTOCOL]}. PROTOCOL is the consumer's {@code group.protocol}: {@code classic} (the default), where
 * ASSIGNOR is the client's ({@code range} or {@code cooperative-sticky}), or {@code consumer} (KIP-848),
 * where ASSIGNOR names the coordinator's ({@code uniform} or {@code range}: {@code
 * group.remote.assignor}). It subscribes to TOPIC in GROUP, polls
 * until it owns exactly OWNED partitions, commits offset BASE + p for each partition p it owns
 * (commitSync), reads back the committed offsets of partitions 0..PARTITIONS-1 (committed()), prints
 * one line and closes, which leaves the group:
 *
 * <pre>RESULT generation=3 assigned=0,1 committed=0:100,1:101,2:7</pre>
 *
 * <p>({@code committed} lists the partitions that have an offset.) If it does not own OWNED
 * partitions within TIMEOUT_MS it prints {@code TIMEOUT assigned=...} and exits with 2.
 */
public final class GroupcoordConsumer {
  private static final Map<String, String> ASSIGNORS =
      Map.of(
          "range", RangeAssignor.class.getName(),
          "cooperative-sticky", CooperativeStickyAssignor.class.getName());
  private static final Set<String> REMOTE_ASSIGNORS = Set.of("uniform", "range");
  private static final Duration POLL = Duration.ofMillis(100);
  private static final Duration CALL_TIMEOUT = Duration.ofSeconds(30);

  public static void main(String[] args) {
    String protocol = args.length == 9 ? args[8] : "classic";
    boolean classic = protocol.equals("classic");
    if ((args.length != 8 && args.length != 9)
        || !(classic ? ASSIGNORS.containsKey(args[3]) : protocol.equals("consumer")
            && REMOTE_ASSIGNORS.contains(args[3]))) {
      System.err.println(
          "usage: GroupcoordConsumer BOOTSTRAP GROUP TOPIC ASSIGNOR OWNED BASE PARTITIONS"
              + " TIMEOUT_MS [classic (range|cooperative-sticky) | consumer (uniform|range)]");
      System.exit(64);
    }
    String topic = args[2];
    int owned = Integer.parseInt(args[4]);
    long base = Long.parseLong(args[5]);
    int partitions = Integer.parseInt(args[6]);
    long deadline = System.nanoTime() + Long.parseLong(args[7]) * 1_000_000L;

    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
    props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    if (classic) {
      props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, ASSIGNORS.get(args[3]));
      // Kafka's smallest session (group.min.session.timeout.ms) and a short heartbeat, as the
      // Python members of these tests use: a rebalance is noticed within half a second.
      props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
      props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
    } else {
      // KIP-848: the coordinator assigns and sets the session and the heartbeat interval (the
      // classic settings above are refused with this protocol).
      props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, args[3]);
    }
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(
        ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());

    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      while (consumer.assignment().size() != owned) {
        if (System.nanoTime() > deadline) {
          System.out.println("TIMEOUT assigned=" + partitionList(consumer.assignment()));
          System.out.flush();
          System.exit(2);
        }
        consumer.poll(POLL);
      }
      Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
      for (TopicPartition tp : consumer.assignment()) {
        // Waits for the committed offsets the poll that assigned tp asked for. committed()
        // below would otherwise reuse that request if it were still in flight, and so return
        // what was committed before the commitSync here.
        consumer.position(tp, CALL_TIMEOUT);
        offsets.put(tp, new OffsetAndMetadata(base + tp.partition()));
      }
      consumer.commitSync(offsets, CALL_TIMEOUT);
      Set<TopicPartition> asked = new HashSet<>();
      for (int p = 0; p < partitions; p++) {
        asked.add(new TopicPartition(topic, p));
      }
      Map<Integer, Long> committed = new TreeMap<>();
      consumer
          .committed(asked, CALL_TIMEOUT)
          .forEach(
              (tp, om) -> {
                if (om != null) {
                  committed.put(tp.partition(), om.offset());
                }
              });
      StringJoiner pairs = new StringJoiner(",");
      committed.forEach((p, o) -> pairs.add(p + ":" + o));
      System.out.println(
          "RESULT generation="
              + consumer.groupMetadata().generationId()
              + " assigned="
              + partitionList(consumer.assignment())
              + " committed="
              + pairs);
      System.out.flush();
    }
  }

  private static String partitionList(Set<TopicPartition> assignment) {
    List<Integer> sorted = new ArrayList<>();
    for (TopicPartition tp : assignment) {
      sorted.add(tp.partition());
    }
    sorted.sort(null);
    StringJoiner joined = new StringJoiner(",");
    sorted.forEach(p -> joined.add(String.valueOf(p)));
    return joined.toString();
  }
}
