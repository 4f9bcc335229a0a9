// A result processor for the Smack Integration Test Framework (sinttest) used
// by bench/interop.sh: writes every test of the run as one JSON line, to the
// file named by the system property `interop.results`:
//   {"spec":"XEP-0045","class":"...","method":"...","test":"...","result":"passed|failed|impossible","message":"..."}
// Tests of a class that could not run at all (its constructor found the
// feature missing) are listed one line per test method, as the suite's own
// summary counts them. Compiled by bench/interop.sh against the suite's jar.
package throng.interop;

import java.io.IOException;
import java.io.Writer;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Map;

import org.igniterealtime.smack.inttest.AbstractSmackIntTest;
import org.igniterealtime.smack.inttest.FailedTest;
import org.igniterealtime.smack.inttest.SmackIntegrationTestFramework;
import org.igniterealtime.smack.inttest.SuccessfulTest;
import org.igniterealtime.smack.inttest.TestNotPossible;
import org.igniterealtime.smack.inttest.TestResult;
import org.igniterealtime.smack.inttest.annotations.SmackIntegrationTest;
import org.igniterealtime.smack.inttest.annotations.SpecificationReference;

public class InteropJsonResultProcessor implements SmackIntegrationTestFramework.TestRunResultProcessor {
    @Override
    public void process(SmackIntegrationTestFramework.TestRunResult run) {
        String path = System.getProperty("interop.results");
        if (path == null) {
            throw new IllegalStateException("set -Dinterop.results=FILE");
        }
        try (Writer w = Files.newBufferedWriter(Paths.get(path), StandardCharsets.UTF_8)) {
            for (SuccessfulTest t : run.getSuccessfulTests()) {
                line(w, t, "passed", null);
            }
            for (FailedTest t : run.getFailedTests()) {
                line(w, t, "failed", describe(t.failureReason));
            }
            for (TestNotPossible t : run.getNotPossibleTests()) {
                line(w, t, "impossible", t.testNotPossibleException == null ? null : t.testNotPossibleException.getMessage());
            }
            for (Map.Entry<Class<? extends AbstractSmackIntTest>, Throwable> e : run.getImpossibleTestClasses().entrySet()) {
                Class<?> c = e.getKey();
                String why = describe(e.getValue());
                for (Method m : c.getMethods()) {
                    if (m.isAnnotationPresent(SmackIntegrationTest.class)) {
                        write(w, spec(m.getDeclaringClass()), c.getName(), m.getName(),
                              c.getSimpleName() + "." + m.getName() + " (class)", "impossible", why);
                    }
                }
            }
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    private static void line(Writer w, TestResult t, String result, String message) throws IOException {
        Method m = t.concreteTest.getMethod();
        write(w, spec(m.getDeclaringClass()), m.getDeclaringClass().getName(), m.getName(),
              t.concreteTest.toString(), result, message);
    }

    private static String describe(Throwable t) {
        if (t == null) {
            return null;
        }
        String msg = t.getMessage();
        if (t instanceof java.lang.reflect.InvocationTargetException && t.getCause() != null) {
            return describe(t.getCause());
        }
        return t.getClass().getSimpleName() + (msg == null || msg.isBlank() ? "" : ": " + msg);
    }

    private static String spec(Class<?> c) {
        SpecificationReference s = c.getAnnotation(SpecificationReference.class);
        if (s == null || s.document().isBlank()) {
            return "(none)";
        }
        return s.document().trim().replaceAll("\\s", "").toUpperCase();
    }

    private static void write(Writer w, String spec, String cls, String method, String test,
                              String result, String message) throws IOException {
        w.write("{\"spec\":" + q(spec) + ",\"class\":" + q(cls) + ",\"method\":" + q(method)
                + ",\"test\":" + q(test) + ",\"result\":" + q(result)
                + ",\"message\":" + (message == null ? "null" : q(message)) + "}\n");
    }

    private static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (ch < 0x20) {
                        b.append(String.format("\\u%04x", (int) ch));
                    } else {
                        b.append(ch);
                    }
            }
        }
        return b.append('"').toString();
    }
}
