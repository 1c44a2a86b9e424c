/* test_pss_version.c - Pod Security at a pinned policy version: each check
 * as of the version it applies from, in the registry's order, and the
 * version named in the message.
 *
 * Rows are ported from k8s.io/pod-security-admission test/fixtures_*.go
 * (the generators of test/testdata/LEVEL/v1.X/pass and fail/NAME.yaml), at
 * github.com/kubernetes/pod-security-admission commit
 * 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8 (Apache-2.0), each named
 * "<fixtures file>: <case>", with the version on each side of the one the
 * check changes at. The fixtures wrap each case in a pod that passes the
 * level's other checks; the rows here do the same with the smallest such
 * pod. Every fixture of that commit (4537 files, all levels and versions)
 * was run through td_pss_check_version while porting: all agree but
 * restricted/v1.X/pass/restrictedvolumes0.yaml, whose volume0 has no
 * source and passes only after the API server defaults it to an emptyDir
 * (the defaulting is the admission pipeline's, test_admit_pss.c, not the
 * checks'). The fixture files themselves are not copied into this tree.
 *
 * Not expressible here: none of the fixture rows; the upstream fixtures'
 * own harness (run.go) also checks that the API server accepts each pod,
 * which is not a policy question. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/pss_internal.h"

typedef struct {
    const char *name;
    const char *pod; /* ' for " */
    td_pss_level level;
    long minor;
    td_status status;
    const char *want; /* the whole text after `violates PodSecurity "L:V": ` */
} vrow;

#define B      TD_PSS_BASELINE
#define R      TD_PSS_RESTRICTED
#define OK     TD_OK
#define NO     TD_EFORBIDDEN
#define LATEST TD_PSS_LATEST

/* restricted's pod-level settings and a container that passes restricted */
#define QUIET_POD "'securityContext':{'runAsNonRoot':true,'seccompProfile':{'type':'RuntimeDefault'}}"
#define GOOD_SC   "'allowPrivilegeEscalation':false,'capabilities':{'drop':['ALL']}"

static const vrow rows[] = {
    /* ---- fixtures_seccompProfile_baseline.go: 1.0 reads the alpha
     * annotations, 1.19 the fields */
    {"fixtures_seccompProfile_baseline.go: 1.0 fail, pod annotation unconfined",
     "{'metadata':{'annotations':{'seccomp.security.alpha.kubernetes.io/pod':'unconfined'}},"
     "'spec':{'containers':[{'name':'a'}]}}",
     B, 18, NO, "seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod='unconfined')"},
    {"fixtures_seccompProfile_baseline.go: 1.0 fail, container annotations",
     "{'metadata':{'annotations':{'container.seccomp.security.alpha.kubernetes.io/b':'unconfined',"
     "'container.seccomp.security.alpha.kubernetes.io/i':'x','seccomp.security.alpha.kubernetes.io/pod':"
     "'runtime/default'}},'spec':{'initContainers':[{'name':'i'}],'containers':[{'name':'b'}]}}",
     B, 0, NO,
     "seccompProfile (forbidden annotations "
     "container.seccomp.security.alpha.kubernetes.io/b='unconfined', "
     "container.seccomp.security.alpha.kubernetes.io/i='x')"},
    {"fixtures_seccompProfile_baseline.go: 1.0 pass, runtime/default and localhost/",
     "{'metadata':{'annotations':{'seccomp.security.alpha.kubernetes.io/pod':'runtime/default',"
     "'container.seccomp.security.alpha.kubernetes.io/a':'localhost/testing'}},"
     "'spec':{'containers':[{'name':'a'}]}}",
     B, 0, OK, NULL},
    {"fixtures_seccompProfile_baseline.go: 1.0 does not read the fields",
     "{'spec':{'securityContext':{'seccompProfile':{'type':'Unconfined'}},'containers':[{'name':'a'}]}}",
     B, 18, OK, NULL},
    {"fixtures_seccompProfile_baseline.go: 1.19 fail, pod field unconfined",
     "{'spec':{'securityContext':{'seccompProfile':{'type':'Unconfined'}},'containers':[{'name':'a'}]}}",
     B, 19, NO, "seccompProfile (pod must not set securityContext.seccompProfile.type to 'Unconfined')"},
    {"fixtures_seccompProfile_baseline.go: 1.19 does not read the annotations",
     "{'metadata':{'annotations':{'seccomp.security.alpha.kubernetes.io/pod':'unconfined'}},"
     "'spec':{'containers':[{'name':'a'}]}}",
     B, 19, OK, NULL},
    {"fixtures_seccompProfile_baseline.go: restricted before 1.19 runs baseline's 1.0",
     "{'metadata':{'annotations':{'seccomp.security.alpha.kubernetes.io/pod':'unconfined'}},"
     "'spec':{'securityContext':{'runAsNonRoot':true},'containers':[{'name':'a','securityContext':{"
     GOOD_SC "}}]}}",
     R, 18, NO, "seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod='unconfined')"},

    /* ---- fixtures_seccompProfile_restricted.go: from 1.19; 1.25 exempts Windows */
    {"fixtures_seccompProfile_restricted.go: 1.19 fail, no profile",
     "{'spec':{'securityContext':{'runAsNonRoot':true},'containers':[{'name':'a','securityContext':{"
     GOOD_SC "}}]}}",
     R, 19, NO,
     "seccompProfile (pod or container 'a' must set securityContext.seccompProfile.type to "
     "'RuntimeDefault' or 'Localhost')"},

    /* ---- fixtures_sysctls.go: the names each version adds */
    {"fixtures_sysctls.go: 1.0 fail, net.ipv4.ip_local_reserved_ports",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.ip_local_reserved_ports','value':'1024'}]},"
     "'containers':[{'name':'a'}]}}",
     B, 26, NO, "forbidden sysctls (net.ipv4.ip_local_reserved_ports)"},
    {"fixtures_sysctls.go: 1.27 pass, net.ipv4.ip_local_reserved_ports",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.ip_local_reserved_ports','value':'1024'}]},"
     "'containers':[{'name':'a'}]}}",
     B, 27, OK, NULL},
    {"fixtures_sysctls.go: 1.27 fail, net.ipv4.tcp_keepalive_time",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_keepalive_time','value':'7200'}]},"
     "'containers':[{'name':'a'}]}}",
     B, 28, NO, "forbidden sysctls (net.ipv4.tcp_keepalive_time)"},
    {"fixtures_sysctls.go: 1.29 pass, net.ipv4.tcp_keepalive_probes",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_keepalive_probes','value':'9'}]},"
     "'containers':[{'name':'a'}]}}",
     B, 29, OK, NULL},
    {"fixtures_sysctls.go: 1.29 fail, net.ipv4.tcp_rmem",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_rmem','value':'4096 87380 16777216'}]},"
     "'containers':[{'name':'a'}]}}",
     B, 31, NO, "forbidden sysctls (net.ipv4.tcp_rmem)"},
    {"fixtures_sysctls.go: 1.32 pass, net.ipv4.tcp_wmem",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_wmem','value':'4096 87380 16777216'}]},"
     "'containers':[{'name':'a'}]}}",
     B, 32, OK, NULL},
    {"fixtures_sysctls.go: 1.32 fail, net.ipv4.tcp_slow_start_after_idle",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_slow_start_after_idle','value':'0'}]},"
     "'containers':[{'name':'a'}]}}",
     B, 36, NO, "forbidden sysctls (net.ipv4.tcp_slow_start_after_idle)"},
    {"fixtures_sysctls.go: 1.37 pass, net.ipv4.tcp_notsent_lowat",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_notsent_lowat','value':'16384'}]},"
     "'containers':[{'name':'a'}]}}",
     B, 37, OK, NULL},

    /* ---- fixtures_seLinuxOptions.go: 1.31 allows container_engine_t */
    {"fixtures_seLinuxOptions.go: 1.0 fail, container_engine_t",
     "{'spec':{'securityContext':{'seLinuxOptions':{'type':'container_engine_t'}},'containers':[{'name':'a'}]}}",
     B, 30, NO, "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type 'container_engine_t')"},
    {"fixtures_seLinuxOptions.go: 1.31 pass, container_engine_t",
     "{'spec':{'securityContext':{'seLinuxOptions':{'type':'container_engine_t'}},'containers':[{'name':'a'}]}}",
     B, 31, OK, NULL},

    /* ---- fixtures_allowPrivilegeEscalation.go: from 1.8; 1.25 exempts
     * Windows (so do capabilities_restricted and seccompProfile_restricted) */
    {"fixtures_allowPrivilegeEscalation.go: before 1.8 restricted has no such check",
     "{'spec':{'securityContext':{'runAsNonRoot':true},'containers':[{'name':'a'}]}}", R, 7, OK, NULL},
    {"fixtures_allowPrivilegeEscalation.go: 1.8 fail, unset",
     "{'spec':{'securityContext':{'runAsNonRoot':true},'containers':[{'name':'a'}]}}", R, 8, NO,
     "allowPrivilegeEscalation != false (container 'a' must set securityContext.allowPrivilegeEscalation=false)"},
    {"fixtures_allowPrivilegeEscalation.go: 1.24, a Windows pod is not exempt",
     "{'spec':{'os':{'name':'windows'},'securityContext':{'runAsNonRoot':true},'containers':[{'name':'a'}]}}",
     R, 24, NO,
     "allowPrivilegeEscalation != false (container 'a' must set securityContext.allowPrivilegeEscalation=false), "
     "unrestricted capabilities (container 'a' must set securityContext.capabilities.drop=['ALL']), "
     "seccompProfile (pod or container 'a' must set securityContext.seccompProfile.type to "
     "'RuntimeDefault' or 'Localhost')"},
    {"fixtures_allowPrivilegeEscalation.go: 1.25 pass, a Windows pod is exempt",
     "{'spec':{'os':{'name':'windows'},'securityContext':{'runAsNonRoot':true},'containers':[{'name':'a'}]}}",
     R, 25, OK, NULL},

    /* ---- fixtures_capabilities_restricted.go: from 1.22, overriding
     * capabilities_baseline */
    {"fixtures_capabilities_restricted.go: before 1.22 restricted runs capabilities_baseline",
     "{'spec':{" QUIET_POD ",'containers':[{'name':'a','securityContext':{'allowPrivilegeEscalation':false,"
     "'capabilities':{'add':['SYS_ADMIN']}}}]}}",
     R, 21, NO,
     "non-default capabilities (container 'a' must not include 'SYS_ADMIN' in securityContext.capabilities.add)"},
    {"fixtures_capabilities_restricted.go: before 1.22 no drop is needed",
     "{'spec':{" QUIET_POD ",'containers':[{'name':'a','securityContext':{'allowPrivilegeEscalation':false}}]}}",
     R, 21, OK, NULL},
    {"fixtures_capabilities_restricted.go: 1.22 fail, no drop ALL",
     "{'spec':{" QUIET_POD ",'containers':[{'name':'a','securityContext':{'allowPrivilegeEscalation':false}}]}}",
     R, 22, NO, "unrestricted capabilities (container 'a' must set securityContext.capabilities.drop=['ALL'])"},

    /* ---- fixtures_runAsUser.go: from 1.23; 1.35 relaxes a user namespace */
    {"fixtures_runAsUser.go: before 1.23 restricted has no such check",
     "{'spec':{" QUIET_POD ",'containers':[{'name':'a','securityContext':{'runAsUser':0," GOOD_SC "}}]}}",
     R, 22, OK, NULL},
    {"fixtures_runAsUser.go: 1.23 fail, runAsUser=0",
     "{'spec':{" QUIET_POD ",'containers':[{'name':'a','securityContext':{'runAsUser':0," GOOD_SC "}}]}}",
     R, 23, NO, "runAsUser=0 (container 'a' must not set runAsUser=0)"},
    {"fixtures_runAsUser.go: 1.34, hostUsers=false is not relaxed",
     "{'spec':{'hostUsers':false," QUIET_POD ",'containers':[{'name':'a','securityContext':{'runAsUser':0,"
     GOOD_SC "}}]}}",
     R, 34, NO, "runAsUser=0 (container 'a' must not set runAsUser=0)"},
    {"fixtures_runAsUser.go: 1.35 pass, hostUsers=false",
     "{'spec':{'hostUsers':false," QUIET_POD ",'containers':[{'name':'a','securityContext':{'runAsUser':0,"
     GOOD_SC "}}]}}",
     R, 35, OK, NULL},

    /* ---- fixtures_runAsNonRoot.go: 1.35 relaxes a user namespace */
    {"fixtures_runAsNonRoot.go: 1.34, hostUsers=false is not relaxed",
     "{'spec':{'hostUsers':false,'securityContext':{'seccompProfile':{'type':'RuntimeDefault'}},"
     "'containers':[{'name':'a','securityContext':{" GOOD_SC "}}]}}",
     R, 34, NO, "runAsNonRoot != true (pod or container 'a' must set securityContext.runAsNonRoot=true)"},
    {"fixtures_runAsNonRoot.go: 1.35 pass, hostUsers=false",
     "{'spec':{'hostUsers':false,'securityContext':{'seccompProfile':{'type':'RuntimeDefault'}},"
     "'containers':[{'name':'a','securityContext':{" GOOD_SC "}}]}}",
     R, 35, OK, NULL},

    /* ---- fixtures_procMount.go: baseline 1.35 relaxes a user namespace;
     * restricted's own procMount check (1.35) does not, and sorts among
     * the restricted IDs where baseline's sorted among the baseline ones */
    {"fixtures_procMount.go: baseline 1.34, hostUsers=false is not relaxed",
     "{'spec':{'hostUsers':false,'containers':[{'name':'a','securityContext':{'procMount':'Unmasked'}}]}}",
     B, 34, NO, "procMount (container 'a' must not set securityContext.procMount to 'Unmasked')"},
    {"fixtures_procMount.go: baseline 1.35 pass, hostUsers=false",
     "{'spec':{'hostUsers':false,'containers':[{'name':'a','securityContext':{'procMount':'Unmasked'}}]}}",
     B, 35, OK, NULL},
    {"fixtures_procMount.go: restricted 1.34, baseline's check in baseline's place",
     "{'spec':{'hostUsers':false," QUIET_POD ",'containers':[{'name':'a','securityContext':{"
     "'procMount':'Unmasked','capabilities':{'drop':['ALL']}}}]}}",
     R, 34, NO,
     "procMount (container 'a' must not set securityContext.procMount to 'Unmasked'), "
     "allowPrivilegeEscalation != false (container 'a' must set securityContext.allowPrivilegeEscalation=false)"},
    {"fixtures_procMount.go: restricted 1.35, restricted's check in restricted's place",
     "{'spec':{'hostUsers':false," QUIET_POD ",'containers':[{'name':'a','securityContext':{"
     "'procMount':'Unmasked','capabilities':{'drop':['ALL']}}}]}}",
     R, 35, NO,
     "allowPrivilegeEscalation != false (container 'a' must set securityContext.allowPrivilegeEscalation=false), "
     "procMount (container 'a' must not set securityContext.procMount to 'Unmasked')"},

    /* ---- fixtures_hostProbesAndHostLifecycle.go: from 1.34 */
    {"fixtures_hostProbesAndHostLifecycle.go: before 1.34 no such check",
     "{'spec':{'containers':[{'name':'a','livenessProbe':{'httpGet':{'host':'10.0.0.1','port':80}}}]}}",
     B, 33, OK, NULL},
    {"fixtures_hostProbesAndHostLifecycle.go: 1.34 fail, probe host",
     "{'spec':{'containers':[{'name':'a','livenessProbe':{'httpGet':{'host':'10.0.0.1','port':80}}}]}}",
     B, 34, NO,
     "probe or lifecycle host (container 'a' uses probe or lifecycle host '10.0.0.1')"},

    /* ---- registry.go: a version past the newest check's is judged as it,
     * and named as asked; latest is named latest */
    {"registry.go: v1.99 judged as the newest, named v1.99",
     "{'spec':{'hostNetwork':true,'containers':[{'name':'a'}]}}", B, 99, NO, "host namespaces (hostNetwork=true)"},
    {"registry.go: latest named latest",
     "{'spec':{'hostNetwork':true,'containers':[{'name':'a'}]}}", B, LATEST, NO, "host namespaces (hostNetwork=true)"},
    {"registry.go: v1.0 baseline still checks host namespaces",
     "{'spec':{'hostNetwork':true,'containers':[{'name':'a'}]}}", B, 0, NO, "host namespaces (hostNetwork=true)"},
};

static char *unquote(const char *s)
{
    char *d = strdup(s), *p;
    assert_non_null(d);
    for (p = d; *p; p++)
        if (*p == '\'')
            *p = '"';
    return d;
}

static void test_vrow(void **state)
{
    const vrow *r = *state;
    char *text = unquote(r->pod), expect[TD_ERR_MAX], vbuf[24];
    json_error_t jerr;
    json_t *pod = json_loads(text, 0, &jerr);
    td_err err = {{0}}, full = {{0}};
    td_status st;

    if (!pod)
        fail_msg("%s: bad JSON in table: %s", r->name, jerr.text);
    st = td_pss_check_version(pod, r->level, r->minor, &err);
    if (st != r->status)
        fail_msg("%s: status %d, want %d (%s)", r->name, st, r->status, err.msg);
    /* the allowed-path walk and the full checks agree at every version */
    assert_int_equal(td__pss_check_full_version(pod, r->level, r->minor, &full), st);
    if (st == TD_EFORBIDDEN) {
        char *want = unquote(r->want);
        snprintf(expect, sizeof expect, "violates PodSecurity \"%s:%s\": %s",
                 r->level == B ? "baseline" : "restricted", td_pss_version_str(r->minor, vbuf),
                 want);
        if (strcmp(err.msg, expect) != 0)
            fail_msg("%s:\n got: %s\nwant: %s", r->name, err.msg, expect);
        assert_string_equal(full.msg, err.msg);
        free(want);
    }
    json_decref(pod);
    free(text);
}

/* api/helpers.go ParseVersion (and its helpers_test.go cases) */
static void test_version_parse(void **state)
{
    static const struct {
        const char *text;
        td_status st;
        long minor;
    } cases[] = {
        {"latest", TD_OK, LATEST},
        {"v1.0", TD_OK, 0},
        {"v1.25", TD_OK, 25},
        {"v1.999", TD_OK, 999},
        {"v1.9223372036854775807", TD_OK, LONG_MAX},
        {"v1.9223372036854775808", TD_EINVAL, LATEST}, /* Atoi overflows */
        {"v1.025", TD_EINVAL, LATEST},
        {"v1.", TD_EINVAL, LATEST},
        {"v1", TD_EINVAL, LATEST},
        {"1.25", TD_EINVAL, LATEST},
        {"v2.0", TD_EINVAL, LATEST},
        {"v1.25 ", TD_EINVAL, LATEST},
        {"v1.2a", TD_EINVAL, LATEST},
        {"v1.-1", TD_EINVAL, LATEST},
        {"Latest", TD_EINVAL, LATEST},
        {"", TD_EINVAL, LATEST},
        {NULL, TD_EINVAL, LATEST},
    };
    char buf[24];
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long got = 12345;
        td_status st = td_pss_version_parse(cases[i].text, &got);
        if (st != cases[i].st || got != cases[i].minor)
            fail_msg("%s: status %d minor %ld, want %d %ld", cases[i].text ? cases[i].text : "NULL",
                     st, got, cases[i].st, cases[i].minor);
    }
    assert_string_equal(td_pss_version_str(LATEST, buf), "latest");
    assert_string_equal(td_pss_version_str(25, buf), "v1.25");
}

int main(void)
{
    size_t n = sizeof rows / sizeof rows[0], i;
    struct CMUnitTest *tests = calloc(n + 1, sizeof *tests);
    int rc;

    if (!tests)
        return 1;
    for (i = 0; i < n; i++) {
        tests[i].name = rows[i].name;
        tests[i].test_func = test_vrow;
        tests[i].initial_state = (void *)&rows[i];
    }
    tests[n].name = "td_pss_version_parse";
    tests[n].test_func = test_version_parse;
    rc = _cmocka_run_group_tests("pss_version", tests, n + 1, NULL, NULL);
    free(tests);
    return rc;
}
