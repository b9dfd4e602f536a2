package io.librl.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A {@code code:<name>} limit, cost or mode is refused at start-up naming its field (docs/http.md,
 * Resolvers in code) until Java reads resolvers: read as a number or a mode it would fail.
 */
class ResolverValuesTest {
  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "{\"policies\":[{\"name\":\"p\",\"algorithm\":\"fixed\",\"limit\":\"code:plan\",\"window\":\"60s\"}]}|policies[0].limit",
        "{\"policies\":[{\"name\":\"p\",\"algorithm\":\"fixed\",\"limit\":5,\"window\":\"60s\",\"cost\":\"code:rows\"}]}|policies[0].cost",
        "{\"mode\":\"code:switch\",\"policies\":[{\"name\":\"p\",\"algorithm\":\"fixed\",\"limit\":5,\"window\":\"60s\"}]}|mode"
      })
  void aResolverValueIsRefusedNamingItsField(String document, String field) {
    ConfigException e = assertThrows(ConfigException.class, () -> Config.parse(document));
    assertEquals(
        "librl: configuration: " + field + ": resolvers (" + document.replaceAll(".*\"(code:[a-z]+)\".*", "$1")
            + ") are not read by the Java integrations yet",
        e.getMessage());
  }
}
