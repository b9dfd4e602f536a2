package io.librl.spring;

import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * {@code librl.*}: where the policy file is and where Redis is (docs/http/java.md, Spring Boot).
 * The file holds everything else (docs/http.md, One configuration).
 */
@ConfigurationProperties("librl")
public class LibrlProperties {
  /** Whether the starter limits requests at all. */
  private boolean enabled = true;

  /** The policy file, YAML or JSON: classpath:policies.yaml, file:/etc/librl/policies.yaml, or a path. */
  private String policies = "classpath:policies.yaml";

  /** A standalone Redis; default: spring.data.redis.url, else redis://127.0.0.1:6379. */
  private String redisUrl;

  /** A cluster's nodes, host:port; default: spring.data.redis.cluster.nodes. */
  private List<String> redisClusterNodes = new ArrayList<>();

  /**
   * The servlet filter's and the WebFilter's order: after Spring Security's filter chain (-100),
   * so that the authenticated user is known.
   */
  private int filterOrder = -90;

  public boolean isEnabled() {
    return enabled;
  }

  public void setEnabled(boolean enabled) {
    this.enabled = enabled;
  }

  public String getPolicies() {
    return policies;
  }

  public void setPolicies(String policies) {
    this.policies = policies;
  }

  public String getRedisUrl() {
    return redisUrl;
  }

  public void setRedisUrl(String redisUrl) {
    this.redisUrl = redisUrl;
  }

  public List<String> getRedisClusterNodes() {
    return redisClusterNodes;
  }

  public void setRedisClusterNodes(List<String> redisClusterNodes) {
    this.redisClusterNodes = redisClusterNodes;
  }

  public int getFilterOrder() {
    return filterOrder;
  }

  public void setFilterOrder(int filterOrder) {
    this.filterOrder = filterOrder;
  }
}
