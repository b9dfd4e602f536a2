package io.librl.spring;

import io.librl.http.ConfigException;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/** A bad policy file, reported as what it is rather than as a bean that could not be created. */
public class LibrlFailureAnalyzer extends AbstractFailureAnalyzer<ConfigException> {
  @Override
  protected FailureAnalysis analyze(Throwable root, ConfigException cause) {
    return new FailureAnalysis(
        cause.getMessage(),
        "Fix the policy file that librl.policies names (docs/http.md, Configuration reference).",
        cause);
  }
}
