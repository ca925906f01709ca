// Prints how many brokers a Kafka cluster reports (Admin.describeCluster), or exits 1.
// Run by deploy/local/cluster.sh as a single-file program: java -cp '<kafka jars>/*' ClusterBrokers.java HOST:PORT,...
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

public class ClusterBrokers {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "8000");
        try (Admin admin = Admin.create(props)) {
            System.out.println(admin.describeCluster().nodes().get(10, TimeUnit.SECONDS).size());
        } catch (Exception e) {
            System.err.println("cluster: " + e);
            System.exit(1);
        }
    }
}
