package io.librl.bench.spring;

import org.apache.catalina.connector.Connector;
import org.springframework.boot.tomcat.servlet.TomcatServletWebServerFactory;
import org.springframework.stereotype.Component;

/**
 * Spring Boot's Tomcat factory (its customizers applied as to the one Boot would make), which also
 * makes the connector the app opens on PORT after its warm-up, customized as the first.
 */
@Component
class BenchTomcat extends TomcatServletWebServerFactory {
  Connector connector(int port) {
    Connector connector = new Connector(getProtocol());
    connector.setThrowOnFailure(true);
    customizeConnector(connector);
    connector.setPort(port);
    return connector;
  }
}
