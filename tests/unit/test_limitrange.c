/* test_limitrange.c - LimitRanger for pods against Kubernetes' own cases,
 * ported from plugin/pkg/admission/limitranger/admission_test.go:
 *   TestPodLimitFunc (every success and error case, with the message the
 *     plugin produces, which the Go test does not pin down),
 *   TestPodLimitFuncApplyDefault, TestMergePodResourceRequirements,
 *   TestDefaultContainerResourceRequirements, TestLimitRangerAdmitPod,
 * plus sidecar, aggregate and malformed-input rows of ours.
 * TestLimitRangerIgnoresSubresource has no counterpart: the API takes no
 * subresource (the caller admits pod creates only).
 * JSON is written with ' for ". Each table loop reports every failing row,
 * then fails once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admission/limitrange_internal.h"
#include "admission/podres_internal.h"

static json_t *J(const char *s)
{
    char *copy = strdup(s);
    json_t *v;
    json_error_t e;

    for (char *p = copy; *p; p++)
        if (*p == '\'')
            *p = '"';
    v = json_loads(copy, 0, &e);
    if (v == NULL)
        fail_msg("bad test JSON (%s): %s", e.text, copy);
    free(copy);
    return v;
}

/* admission_test.go's helpers, as JSON. */
#define CPU(x) "'cpu':'" x "'"
#define MEM(x) "'memory':'" x "'"
#define CM(c, m) CPU(c) "," MEM(m)
#define CTR(name, req, lim)                                                                      \
    "{'name':'" name "','image':'foo:V','resources':{'requests':{" req "},'limits':{" lim "}}}"
#define SIDECAR(name, req, lim)                                                                  \
    "{'name':'" name "','restartPolicy':'Always','resources':{'requests':{" req                 \
    "},'limits':{" lim "}}}"
#define POD(name, ctrs) "{'metadata':{'name':'" name "','namespace':'test'},'spec':{'containers':[" ctrs "]}}"
#define PODI(name, ctrs, inits)                                                                  \
    "{'metadata':{'name':'" name "','namespace':'test'},'spec':{'containers':[" ctrs             \
    "],'initContainers':[" inits "]}}"
#define POD1(name, req, lim) POD(name, CTR("foo-0", req, lim))
#define POD2(name, req, lim) POD(name, CTR("foo-0", req, lim) "," CTR("foo-1", req, lim))
#define POD3(name, req, lim)                                                                     \
    POD(name, CTR("foo-0", req, lim) "," CTR("foo-1", req, lim) "," CTR("foo-2", req, lim))
#define ITEM(type, min, max, def, defreq, ratio)                                                 \
    "{'type':'" type "','min':{" min "},'max':{" max "},'default':{" def                         \
    "},'defaultRequest':{" defreq "},'maxLimitRequestRatio':{" ratio "}}"
/* createLimitRange(type, min, max, default, defaultRequest, ratio) */
#define LR(type, min, max, def, defreq, ratio)                                                   \
    "[{'metadata':{'name':'abc','namespace':'test'},'spec':{'limits':[" ITEM(                  \
        type, min, max, def, defreq, ratio) "]}}]"
#define CTRLR(min, max, ratio) LR("Container", min, max, "", "", ratio)
#define PODLR(min, max, ratio) LR("Pod", min, max, "", "", ratio)
/* validLimitRange() and validLimitRangeNoDefaults() */
#define VALID_LR                                                                                 \
    "[{'metadata':{'name':'abc','namespace':'test'},'spec':{'limits':["                        \
    "{'type':'Pod','max':{" CM("200m", "4Gi") "},'min':{" CM("50m", "2Mi") "}},"                 \
    "{'type':'Container','max':{" CM("100m", "2Gi") "},'min':{" CM("25m", "1Mi") "},"            \
    "'default':{" CM("75m", "10Mi") "},'defaultRequest':{" CM("50m", "5Mi") "}}]}}]"
#define VALID_LR_NO_DEFAULTS                                                                     \
    "[{'metadata':{'name':'abc','namespace':'test'},'spec':{'limits':["                        \
    "{'type':'Pod','max':{" CM("200m", "4Gi") "},'min':{" CM("50m", "2Mi") "}},"                 \
    "{'type':'Container','max':{" CM("100m", "2Gi") "},'min':{" CM("25m", "1Mi") "}}]}}]"

/* Runs both halves, as the API server does: Admit (defaults), Validate. */
static const struct {
    const char *name;
    const char *pod;
    const char *limitranges; /* a JSON array */
    td_status st;
    const char *msg;
} admit_rows[] = {
    /* An item naming more resources than the prepared form holds (17):
     * checked name by name, to the same answers. */
    {"many names, within", POD1("many", CPU("100m") ",'r00.example.com/x':'1','r01.example.com/x':'1','r02.example.com/x':'1','r03.example.com/x':'1','r04.example.com/x':'1','r05.example.com/x':'1','r06.example.com/x':'1','r07.example.com/x':'1','r08.example.com/x':'1','r09.example.com/x':'1','r10.example.com/x':'1','r11.example.com/x':'1','r12.example.com/x':'1','r13.example.com/x':'1','r14.example.com/x':'1','r15.example.com/x':'1','r16.example.com/x':'1'", CPU("200m") ",'r00.example.com/x':'1','r01.example.com/x':'1','r02.example.com/x':'1','r03.example.com/x':'1','r04.example.com/x':'1','r05.example.com/x':'1','r06.example.com/x':'1','r07.example.com/x':'1','r08.example.com/x':'1','r09.example.com/x':'1','r10.example.com/x':'1','r11.example.com/x':'1','r12.example.com/x':'1','r13.example.com/x':'1','r14.example.com/x':'1','r15.example.com/x':'1','r16.example.com/x':'1'"),
     CTRLR("", CPU("1") ",'r00.example.com/x':'1','r01.example.com/x':'1','r02.example.com/x':'1','r03.example.com/x':'1','r04.example.com/x':'1','r05.example.com/x':'1','r06.example.com/x':'1','r07.example.com/x':'1','r08.example.com/x':'1','r09.example.com/x':'1','r10.example.com/x':'1','r11.example.com/x':'1','r12.example.com/x':'1','r13.example.com/x':'1','r14.example.com/x':'1','r15.example.com/x':'1','r16.example.com/x':'1'", ""), TD_OK, ""},
    {"many names, over", POD1("many", CPU("100m") ",'r00.example.com/x':'1','r01.example.com/x':'1','r02.example.com/x':'1','r03.example.com/x':'1','r04.example.com/x':'1','r05.example.com/x':'1','r06.example.com/x':'1','r07.example.com/x':'1','r08.example.com/x':'1','r09.example.com/x':'1','r10.example.com/x':'1','r11.example.com/x':'1','r12.example.com/x':'1','r13.example.com/x':'1','r14.example.com/x':'1','r15.example.com/x':'1','r16.example.com/x':'1'", CPU("2") ",'r00.example.com/x':'1','r01.example.com/x':'1','r02.example.com/x':'1','r03.example.com/x':'1','r04.example.com/x':'1','r05.example.com/x':'1','r06.example.com/x':'1','r07.example.com/x':'1','r08.example.com/x':'1','r09.example.com/x':'1','r10.example.com/x':'1','r11.example.com/x':'1','r12.example.com/x':'1','r13.example.com/x':'1','r14.example.com/x':'1','r15.example.com/x':'1','r16.example.com/x':'1'"),
     CTRLR("", CPU("1") ",'r00.example.com/x':'1','r01.example.com/x':'1','r02.example.com/x':'1','r03.example.com/x':'1','r04.example.com/x':'1','r05.example.com/x':'1','r06.example.com/x':'1','r07.example.com/x':'1','r08.example.com/x':'1','r09.example.com/x':'1','r10.example.com/x':'1','r11.example.com/x':'1','r12.example.com/x':'1','r13.example.com/x':'1','r14.example.com/x':'1','r15.example.com/x':'1','r16.example.com/x':'1'", ""), TD_EFORBIDDEN,
     "maximum cpu usage per Container is 1, but limit is 2"},
    /* Values past milli precision, and negative ones: compared as
     * requestLimitEnforcedValues does (units when milli-units overflow). */
    {"huge values compared in units", POD1("huge", CPU("8E"), CPU("8E")), CTRLR("", CPU("9E"), ""),
     TD_OK, ""},
    {"huge limit over a huge max", POD1("huge", CPU("8E"), CPU("9E")), CTRLR("", CPU("8E"), ""),
     TD_EFORBIDDEN, "maximum cpu usage per Container is 8E, but limit is 9E"},
    {"negative request above a negative min", POD1("neg", CPU("-1500m"), ""),
     CTRLR(CPU("-2"), "", ""), TD_OK, ""},
    /* TestPodLimitFunc successCases */
    {"ctr-min-cpu-request", POD1("ctr-min-cpu-request", CPU("100m"), ""), CTRLR(CPU("50m"), "", ""), TD_OK, ""},
    {"ctr-min-cpu-request-limit", POD1("ctr-min-cpu-request-limit", CPU("100m"), CPU("200m")), CTRLR(CPU("50m"), "", ""), TD_OK, ""},
    {"ctr-min-memory-request", POD1("ctr-min-memory-request", MEM("60Mi"), ""), CTRLR(MEM("50Mi"), "", ""), TD_OK, ""},
    {"ctr-min-memory-request-limit", POD1("ctr-min-memory-request-limit", MEM("60Mi"), MEM("100Mi")), CTRLR(MEM("50Mi"), "", ""), TD_OK, ""},
    {"ctr-max-cpu-request-limit", POD1("ctr-max-cpu-request-limit", CPU("500m"), CPU("1")), CTRLR("", CPU("2"), ""), TD_OK, ""},
    {"ctr-max-cpu-limit", POD1("ctr-max-cpu-limit", "", CPU("1")), CTRLR("", CPU("2"), ""), TD_OK, ""},
    {"ctr-max-mem-request-limit", POD1("ctr-max-mem-request-limit", MEM("250Mi"), MEM("500Mi")), CTRLR("", MEM("1Gi"), ""), TD_OK, ""},
    {"ctr-max-cpu-ratio", POD1("ctr-max-cpu-ratio", CPU("500m"), CPU("750m")), CTRLR("", "", CPU("1.5")), TD_OK, ""},
    {"ctr-max-mem-limit", POD1("ctr-max-mem-limit", "", MEM("500Mi")), CTRLR("", MEM("1Gi"), ""), TD_OK, ""},
    {"pod-min-cpu-request", POD2("pod-min-cpu-request", CPU("75m"), ""), PODLR(CPU("100m"), "", ""), TD_OK, ""},
    {"pod-min-cpu-request-limit", POD2("pod-min-cpu-request-limit", CPU("75m"), CPU("200m")), PODLR(CPU("100m"), "", ""), TD_OK, ""},
    {"pod-min-memory-request", POD2("pod-min-memory-request", MEM("60Mi"), ""), PODLR(MEM("100Mi"), "", ""), TD_OK, ""},
    {"pod-min-memory-request-limit", POD2("pod-min-memory-request-limit", MEM("60Mi"), MEM("100Mi")), PODLR(MEM("100Mi"), "", ""), TD_OK, ""},
    {"pod-init-min-memory-request",
     PODI("pod-init-min-memory-request", CTR("foo-0", MEM("60Mi"), "") "," CTR("foo-1", MEM("60Mi"), ""), CTR("foo-0", MEM("100Mi"), "")),
     PODLR(MEM("100Mi"), "", ""), TD_OK, ""},
    {"pod-init-min-memory-request-limit",
     PODI("pod-init-min-memory-request-limit", CTR("foo-0", MEM("60Mi"), MEM("100Mi")) "," CTR("foo-1", MEM("60Mi"), MEM("100Mi")), CTR("foo-0", MEM("80Mi"), MEM("100Mi"))),
     PODLR(MEM("100Mi"), "", ""), TD_OK, ""},
    {"pod-max-cpu-request-limit", POD2("pod-max-cpu-request-limit", CPU("500m"), CPU("1")), PODLR("", CPU("2"), ""), TD_OK, ""},
    {"pod-max-cpu-limit", POD2("pod-max-cpu-limit", "", CPU("1")), PODLR("", CPU("2"), ""), TD_OK, ""},
    {"pod-init-max-cpu-request-limit",
     PODI("pod-init-max-cpu-request-limit", CTR("foo-0", CPU("500m"), CPU("1")) "," CTR("foo-1", CPU("500m"), CPU("1")),
          CTR("foo-0", CPU("1"), CPU("2")) "," CTR("foo-1", CPU("1"), CPU("1"))),
     PODLR("", CPU("2"), ""), TD_OK, ""},
    {"pod-init-max-cpu-limit",
     PODI("pod-init-max-cpu-limit", CTR("foo-0", "", CPU("1")) "," CTR("foo-1", "", CPU("1")),
          CTR("foo-0", "", CPU("2")) "," CTR("foo-1", "", CPU("2"))),
     PODLR("", CPU("2"), ""), TD_OK, ""},
    {"pod-max-mem-request-limit", POD2("pod-max-mem-request-limit", MEM("250Mi"), MEM("500Mi")), PODLR("", MEM("1Gi"), ""), TD_OK, ""},
    {"pod-max-mem-limit", POD2("pod-max-mem-limit", "", MEM("500Mi")), PODLR("", MEM("1Gi"), ""), TD_OK, ""},
    {"pod-max-mem-ratio", POD3("pod-max-mem-ratio", MEM("300Mi"), MEM("450Mi")), PODLR("", MEM("2Gi"), MEM("1.5")), TD_OK, ""},

    /* TestPodLimitFunc errorCases */
    {"ctr-min-cpu-request (error)", POD1("ctr-min-cpu-request", CPU("40m"), ""), CTRLR(CPU("50m"), "", ""),
     TD_EFORBIDDEN, "minimum cpu usage per Container is 50m, but request is 40m"},
    {"ctr-min-cpu-request-limit (error)", POD1("ctr-min-cpu-request-limit", CPU("40m"), CPU("200m")), CTRLR(CPU("50m"), "", ""),
     TD_EFORBIDDEN, "minimum cpu usage per Container is 50m, but request is 40m"},
    {"ctr-min-cpu-no-request-limit", POD1("ctr-min-cpu-no-request-limit", "", ""), CTRLR(CPU("50m"), "", ""),
     TD_EFORBIDDEN, "minimum cpu usage per Container is 50m.  No request is specified"},
    {"ctr-min-memory-request (error)", POD1("ctr-min-memory-request", MEM("40Mi"), ""), CTRLR(MEM("50Mi"), "", ""),
     TD_EFORBIDDEN, "minimum memory usage per Container is 50Mi, but request is 40Mi"},
    {"ctr-min-memory-request-limit (error)", POD1("ctr-min-memory-request-limit", MEM("40Mi"), MEM("100Mi")), CTRLR(MEM("50Mi"), "", ""),
     TD_EFORBIDDEN, "minimum memory usage per Container is 50Mi, but request is 40Mi"},
    {"ctr-min-memory-no-request-limit", POD1("ctr-min-memory-no-request-limit", "", ""), CTRLR(MEM("50Mi"), "", ""),
     TD_EFORBIDDEN, "minimum memory usage per Container is 50Mi.  No request is specified"},
    {"ctr-max-cpu-request-limit (error)", POD1("ctr-max-cpu-request-limit", CPU("500m"), CPU("2500m")), CTRLR("", CPU("2"), ""),
     TD_EFORBIDDEN, "maximum cpu usage per Container is 2, but limit is 2500m"},
    {"ctr-max-cpu-limit (error)", POD1("ctr-max-cpu-limit", "", CPU("2500m")), CTRLR("", CPU("2"), ""),
     TD_EFORBIDDEN, "maximum cpu usage per Container is 2, but limit is 2500m"},
    {"ctr-max-cpu-no-request-limit", POD1("ctr-max-cpu-no-request-limit", "", ""), CTRLR("", CPU("2"), ""),
     TD_EFORBIDDEN, "maximum cpu usage per Container is 2.  No limit is specified"},
    {"ctr-max-cpu-ratio (error)", POD1("ctr-max-cpu-ratio", CPU("1250m"), CPU("2500m")), CTRLR("", "", CPU("1")),
     TD_EFORBIDDEN, "cpu max limit to request ratio per Container is 1, but provided ratio is 2.000000"},
    {"ctr-max-mem-request-limit (error)", POD1("ctr-max-mem-request-limit", MEM("250Mi"), MEM("2Gi")), CTRLR("", MEM("1Gi"), ""),
     TD_EFORBIDDEN, "maximum memory usage per Container is 1Gi, but limit is 2Gi"},
    {"ctr-max-mem-limit (error)", POD1("ctr-max-mem-limit", "", MEM("2Gi")), CTRLR("", MEM("1Gi"), ""),
     TD_EFORBIDDEN, "maximum memory usage per Container is 1Gi, but limit is 2Gi"},
    {"ctr-max-mem-no-request-limit", POD1("ctr-max-mem-no-request-limit", "", ""), CTRLR("", MEM("1Gi"), ""),
     TD_EFORBIDDEN, "maximum memory usage per Container is 1Gi.  No limit is specified"},
    {"pod-min-cpu-request (error)", POD1("pod-min-cpu-request", CPU("75m"), ""), PODLR(CPU("100m"), "", ""),
     TD_EFORBIDDEN, "minimum cpu usage per Pod is 100m, but request is 75m"},
    {"pod-min-cpu-request-limit (error)", POD1("pod-min-cpu-request-limit", CPU("75m"), CPU("200m")), PODLR(CPU("100m"), "", ""),
     TD_EFORBIDDEN, "minimum cpu usage per Pod is 100m, but request is 75m"},
    {"pod-min-memory-request (error)", POD1("pod-min-memory-request", MEM("60Mi"), ""), PODLR(MEM("100Mi"), "", ""),
     TD_EFORBIDDEN, "minimum memory usage per Pod is 100Mi, but request is 60Mi"},
    {"pod-min-memory-request-limit (error)", POD1("pod-min-memory-request-limit", MEM("60Mi"), MEM("100Mi")), PODLR(MEM("100Mi"), "", ""),
     TD_EFORBIDDEN, "minimum memory usage per Pod is 100Mi, but request is 60Mi"},
    {"pod-max-cpu-request-limit (error)", POD3("pod-max-cpu-request-limit", CPU("500m"), CPU("1")), PODLR("", CPU("2"), ""),
     TD_EFORBIDDEN, "maximum cpu usage per Pod is 2, but limit is 3"},
    {"pod-max-cpu-limit (error)", POD3("pod-max-cpu-limit", "", CPU("1")), PODLR("", CPU("2"), ""),
     TD_EFORBIDDEN, "maximum cpu usage per Pod is 2, but limit is 3"},
    {"pod-max-mem-request-limit (error)", POD3("pod-max-mem-request-limit", MEM("250Mi"), MEM("500Mi")), PODLR("", MEM("1Gi"), ""),
     TD_EFORBIDDEN, "maximum memory usage per Pod is 1Gi, but limit is 1500Mi"},
    {"pod-max-mem-limit (error)", POD3("pod-max-mem-limit", "", MEM("500Mi")), PODLR("", MEM("1Gi"), ""),
     TD_EFORBIDDEN, "maximum memory usage per Pod is 1Gi, but limit is 1500Mi"},
    {"pod-init-max-mem-limit",
     PODI("pod-init-max-mem-limit", CTR("foo-0", "", MEM("500Mi")), CTR("foo-0", "", MEM("1.5Gi"))),
     PODLR("", MEM("1Gi"), ""), TD_EFORBIDDEN, "maximum memory usage per Pod is 1Gi, but limit is 1536Mi"},
    {"pod-max-mem-ratio (error)", POD3("pod-max-mem-ratio", MEM("250Mi"), MEM("500Mi")), PODLR("", MEM("2Gi"), MEM("1.5")),
     TD_EFORBIDDEN, "memory max limit to request ratio per Pod is 1500m, but provided ratio is 2.000000"},

    /* TestLimitRangerAdmitPod: no resources against validLimitRangeNoDefaults */
    {"TestLimitRangerAdmitPod", POD1("testPod", "", ""), VALID_LR_NO_DEFAULTS, TD_EFORBIDDEN,
     "[minimum cpu usage per Pod is 50m.  No request is specified, "
     "minimum memory usage per Pod is 2Mi.  No request is specified, "
     "maximum cpu usage per Pod is 200m.  No limit is specified, "
     "maximum memory usage per Pod is 4Gi.  No limit is specified, "
     "minimum cpu usage per Container is 25m.  No request is specified, "
     "minimum memory usage per Container is 1Mi.  No request is specified, "
     "maximum cpu usage per Container is 100m.  No limit is specified, "
     "maximum memory usage per Container is 2Gi.  No limit is specified]"},
    /* TestPodLimitFuncApplyDefault: defaults make the pod valid */
    {"TestPodLimitFuncApplyDefault", PODI("foo", CTR("foo-0", "", ""), CTR("foo-0", "", "")), VALID_LR, TD_OK, ""},

    /* the examples of the LimitRanger documentation */
    {"min cpu per container", POD1("p", CPU("50m"), ""), CTRLR(CPU("100m"), "", ""), TD_EFORBIDDEN,
     "minimum cpu usage per Container is 100m, but request is 50m"},
    {"min cpu limit per container", POD1("p", CPU("150m"), CPU("80m")), CTRLR(CPU("100m"), "", ""), TD_EFORBIDDEN,
     "minimum cpu usage per Container is 100m, but limit is 80m"},
    {"max request per container", POD1("p", CPU("3"), CPU("1")), CTRLR("", CPU("2"), ""), TD_EFORBIDDEN,
     "maximum cpu usage per Container is 2, but request is 3"},
    {"max memory per pod", POD2("p", "", MEM("1Gi")), PODLR("", MEM("1Gi"), ""), TD_EFORBIDDEN,
     "maximum memory usage per Pod is 1Gi, but limit is 2Gi"},
    {"cpu ratio 4", POD1("p", CPU("250m"), CPU("1")), CTRLR("", "", CPU("2")), TD_EFORBIDDEN,
     "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000"},
    {"ratio without request", POD1("p", "", CPU("1")), CTRLR("", "", CPU("2")), TD_EFORBIDDEN,
     "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0"},
    {"ratio with zero request", POD1("p", CPU("0"), CPU("1")), CTRLR("", "", CPU("2")), TD_EFORBIDDEN,
     "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0"},
    {"ratio without limit", POD1("p", CPU("1"), ""), CTRLR("", "", CPU("2")), TD_EFORBIDDEN,
     "cpu max limit to request ratio per Container is 2, but no limit is specified or limit is 0"},
    {"ratio of a third", POD1("p", CPU("300m"), CPU("1")), CTRLR("", "", CPU("3")), TD_EFORBIDDEN,
     "cpu max limit to request ratio per Container is 3, but provided ratio is 3.333333"},
    {"milli comparison: 0.5m rounds up to 1m", POD1("p", CPU("0.5m"), ""), CTRLR(CPU("1m"), "", ""), TD_OK, ""},
    {"init container checked as a Container", PODI("p", CTR("a", CPU("100m"), ""), CTR("i", CPU("10m"), "")),
     CTRLR(CPU("50m"), "", ""), TD_EFORBIDDEN, "minimum cpu usage per Container is 50m, but request is 10m"},
    {"several violations aggregate", POD1("p", "", ""), CTRLR(CPU("50m"), MEM("1Gi"), ""), TD_EFORBIDDEN,
     "[minimum cpu usage per Container is 50m.  No request is specified, "
     "maximum memory usage per Container is 1Gi.  No limit is specified]"},
    {"repeated violations reported once", POD2("p", CPU("10m"), ""), CTRLR(CPU("50m"), "", ""), TD_EFORBIDDEN,
     "minimum cpu usage per Container is 50m, but request is 10m"},
    {"first violated LimitRange wins",
     POD1("p", CPU("10m"), ""),
     "[{'metadata':{'name':'ok'},'spec':{'limits':[" ITEM("Container", CPU("1m"), "", "", "", "") "]}},"
     "{'metadata':{'name':'one'},'spec':{'limits':[" ITEM("Container", CPU("20m"), "", "", "", "") "]}},"
     "{'metadata':{'name':'two'},'spec':{'limits':[" ITEM("Container", CPU("30m"), "", "", "", "") "]}}]",
     TD_EFORBIDDEN, "minimum cpu usage per Container is 20m, but request is 10m"},
    {"PersistentVolumeClaim items ignored", POD1("p", "", ""),
     LR("PersistentVolumeClaim", "'storage':'1Gi'", "", "", "", ""), TD_OK, ""},
    {"no limit ranges", POD1("p", "", ""), "[]", TD_OK, ""},
    /* restartable init containers (sidecars) in the Pod sums */
    {"pod max with sidecar before init",
     PODI("p", CTR("a", "", CPU("1")), SIDECAR("s", "", CPU("1")) "," CTR("i", "", CPU("1500m"))),
     PODLR("", CPU("2"), ""), TD_EFORBIDDEN, "maximum cpu usage per Pod is 2, but limit is 2500m"},
    {"pod max with init before sidecar",
     PODI("p", CTR("a", "", CPU("1")), CTR("i", "", CPU("1500m")) "," SIDECAR("s", "", CPU("1"))),
     PODLR("", CPU("2"), ""), TD_OK, ""},
    {"pod sums leave out overhead",
     "{'spec':{'overhead':{'cpu':'1'},'containers':[" CTR("a", CPU("1"), CPU("2")) "]}}",
     PODLR("", CPU("2"), ""), TD_OK, ""},
    /* malformed input */
    {"bad pod quantity", POD1("p", "", CPU("2x")), CTRLR(CPU("50m"), "", ""), TD_EINVAL,
     "spec.containers[0].resources.limits.cpu: \"2x\" is not a quantity"},
    {"bad limit range quantity", POD1("p", "", ""), CTRLR("", CPU("x"), ""), TD_EINVAL,
     "LimitRange \"abc\": spec.limits[0].max.cpu: \"x\" is not a quantity"},
    {"limits not an array", POD1("p", "", ""), "[{'metadata':{'name':'abc'},'spec':{'limits':{}}}]", TD_EINVAL,
     "LimitRange \"abc\": spec.limits: must be an array"},
    {"limit range not an object", POD1("p", "", ""), "[7]", TD_EINVAL, "limitranges[0]: must be an object"},
};

static void test_admit(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof admit_rows / sizeof admit_rows[0]; i++) {
        json_t *pod = J(admit_rows[i].pod);
        json_t *lrs = J(admit_rows[i].limitranges);
        json_t **objs = calloc(json_array_size(lrs) + 1, sizeof *objs);
        size_t n = json_array_size(lrs);
        td_err err = {{0}};
        td_status st;

        for (size_t k = 0; k < n; k++)
            objs[k] = json_array_get(lrs, k);
        json_t *pod2 = json_deep_copy(pod);
        st = td_limitrange_default(pod, objs, n, &err);
        if (st == TD_OK)
            st = td_limitrange_validate(pod, objs, n, &err);
        /* The same from LimitRanges parsed once (as the admission index
         * holds them): same status, message and pod, or a parse that fails
         * where the JSON entry points fail too (admission then uses them). */
        td_limitranges *parsed = NULL;
        td_err perr = {{0}};
        td_status pst = td_limitranges_parse(objs, n, &parsed, &perr);
        if (pst != TD_OK) {
            if (st == TD_OK) {
                print_message("%s: parse failed: %s\n", admit_rows[i].name, perr.msg);
                failed++;
            }
        } else {
            pst = td_limitrange_default_parsed(pod2, parsed, &perr);
            if (pst == TD_OK) {
                /* with the pod parsed by the caller too, as td_admit_pod does */
                td__pod pp;
                if (td__pod_parse(pod2, &pp, NULL) == TD_OK) {
                    td_err e2 = {{0}};
                    td_status s2 = td_limitrange_validate_parsed(pod2, &pp, parsed, &e2);
                    td__pod_fini(&pp);
                    pst = td_limitrange_validate_parsed(pod2, NULL, parsed, &perr);
                    if (s2 != pst || strcmp(e2.msg, perr.msg) != 0) {
                        print_message("%s: pre-parsed pod differs\n", admit_rows[i].name);
                        failed++;
                    }
                } else {
                    pst = td_limitrange_validate_parsed(pod2, NULL, parsed, &perr);
                }
            }
            if (pst != st || (st != TD_OK && strcmp(perr.msg, err.msg) != 0) ||
                !json_equal(pod, pod2)) {
                print_message("%s: parsed path: status %d (%s), JSON path %d (%s)\n",
                              admit_rows[i].name, pst, perr.msg, st, err.msg);
                failed++;
            }
            /* As td_admit_pod runs it: request defaulting keeping its parse,
             * LimitRange defaulting updating it, then validation on it; the
             * kept parse must equal a fresh one. */
            json_t *pod3 = J(admit_rows[i].pod);
            td__pod kept;
            td_err e3 = {{0}};
            td_status s3 = td__pod_default_requests_parsed(pod3, &kept, &e3);
            bool have = s3 == TD_OK;
            if (s3 == TD_OK)
                s3 = td__limitrange_default_update(pod3, parsed, &kept, &e3);
            if (s3 == TD_OK) {
                td__pod fresh;
                memset(&fresh, 0, sizeof fresh);
                if (td__pod_refresh(pod3, &kept, NULL) != TD_OK ||
                    td__pod_parse(pod3, &fresh, NULL) != TD_OK || !td__pod_same(&kept, &fresh)) {
                    print_message("%s: kept parse differs from a fresh one\n",
                                  admit_rows[i].name);
                    failed++;
                } else {
                    s3 = td_limitrange_validate_parsed(pod3, &kept, parsed, &e3);
                }
                td__pod_fini(&fresh);
            }
            if (have)
                td__pod_fini(&kept);
            /* the JSON entry points after the same request defaulting */
            json_t *pod4 = J(admit_rows[i].pod);
            td_status s4 = td_pod_default_requests(pod4, NULL);
            if (s4 == TD_OK)
                s4 = td_limitrange_default(pod4, objs, n, NULL);
            if (s4 == TD_OK)
                s4 = td_limitrange_validate(pod4, objs, n, NULL);
            if (s3 != s4 || (s3 == TD_OK && !json_equal(pod3, pod4))) {
                print_message("%s: kept-parse path: status %d (%s), JSON path %d\n",
                              admit_rows[i].name, s3, e3.msg, s4);
                failed++;
            }
            json_decref(pod3);
            json_decref(pod4);
        }
        td_limitranges_destroy(parsed);
        json_decref(pod2);
        if (st != admit_rows[i].st) {
            print_message("%s: status %d, want %d (%s)\n", admit_rows[i].name, st,
                          admit_rows[i].st, err.msg);
            failed++;
        } else if (st != TD_OK && strcmp(err.msg, admit_rows[i].msg) != 0) {
            print_message("%s: message\n  got  %s\n  want %s\n", admit_rows[i].name, err.msg,
                          admit_rows[i].msg);
            failed++;
        }
        free(objs);
        json_decref(lrs);
        json_decref(pod);
    }
    if (failed)
        fail_msg("%d admit row(s) failed", failed);
}

/* td_limitrange_default alone: the pod it leaves. */
static const struct {
    const char *name;
    const char *pod;
    const char *limitranges;
    const char *want; /* the pod afterwards */
} default_rows[] = {
    /* TestMergePodResourceRequirements, TestDefaultContainerResourceRequirements */
    {"empty-resources", POD1("empty-resources", "", ""), VALID_LR,
     "{'metadata':{'name':'empty-resources','namespace':'test','annotations':{'kubernetes.io/limit-ranger':"
     "'LimitRanger plugin set: cpu, memory request for container foo-0; cpu, memory limit for container foo-0'}},"
     "'spec':{'containers':[" CTR("foo-0", CM("50m", "5Mi"), CM("75m", "10Mi")) "]}}"},
    {"limit-memory",
     PODI("limit-memory", CTR("foo-0", MEM("512Mi"), ""), CTR("foo-0", MEM("512Mi"), "")), VALID_LR,
     "{'metadata':{'name':'limit-memory','namespace':'test','annotations':{'kubernetes.io/limit-ranger':"
     "'LimitRanger plugin set: cpu request for container foo-0; cpu, memory limit for container foo-0; "
     "cpu request for init container foo-0; cpu, memory limit for init container foo-0'}},"
     "'spec':{'containers':[" CTR("foo-0", CM("50m", "512Mi"), CM("75m", "10Mi")) "],"
     "'initContainers':[" CTR("foo-0", CM("50m", "512Mi"), CM("75m", "10Mi")) "]}}"},
    {"all enumerated: nothing merged, no annotation",
     PODI("limit-memory", CTR("foo-0", CM("100m", "512Mi"), CM("200m", "1G")), CTR("foo-0", CM("200m", "1G"), CM("400m", "2G"))),
     VALID_LR,
     PODI("limit-memory", CTR("foo-0", CM("100m", "512Mi"), CM("200m", "1G")), CTR("foo-0", CM("200m", "1G"), CM("400m", "2G")))},
    /* TestPodLimitFuncApplyDefault */
    {"TestPodLimitFuncApplyDefault", PODI("foo", "{'name':'foo-0'}", "{'name':'foo-0'}"), VALID_LR,
     "{'metadata':{'name':'foo','namespace':'test','annotations':{'kubernetes.io/limit-ranger':"
     "'LimitRanger plugin set: cpu, memory request for container foo-0; cpu, memory limit for container foo-0; "
     "cpu, memory request for init container foo-0; cpu, memory limit for init container foo-0'}},"
     "'spec':{'containers':[{'name':'foo-0','resources':{'requests':{" CM("50m", "5Mi") "},'limits':{" CM("75m", "10Mi") "}}}],"
     "'initContainers':[{'name':'foo-0','resources':{'requests':{" CM("50m", "5Mi") "},'limits':{" CM("75m", "10Mi") "}}}]}}"},
    {"defaults printed canonically",
     "{'spec':{'containers':[{'name':'a'}]}}",
     LR("Container", "", "", CPU("0.5"), "'memory':'1024Mi'", ""),
     "{'metadata':{'annotations':{'kubernetes.io/limit-ranger':"
     "'LimitRanger plugin set: memory request for container a; cpu limit for container a'}},"
     "'spec':{'containers':[{'name':'a','resources':{'limits':{'cpu':'500m'},'requests':{'memory':'1Gi'}}}]}}"},
    {"later LimitRange replaces the annotation",
     "{'metadata':{'annotations':{'x':'y'}},'spec':{'containers':[{'name':'a'}]}}",
     "[{'metadata':{'name':'one'},'spec':{'limits':[" ITEM("Container", "", "", CPU("1"), "", "") "]}},"
     "{'metadata':{'name':'two'},'spec':{'limits':[" ITEM("Container", "", "", CM("2", "1Gi"), "", "") "]}}]",
     "{'metadata':{'annotations':{'x':'y','kubernetes.io/limit-ranger':"
     "'LimitRanger plugin set: memory limit for container a'}},"
     "'spec':{'containers':[{'name':'a','resources':{'limits':{'cpu':'1','memory':'1Gi'}}}]}}"},
    {"later item of one LimitRange wins",
     "{'spec':{'containers':[{'name':'a'}]}}",
     "[{'metadata':{'name':'one'},'spec':{'limits':[" ITEM("Container", "", "", CPU("1"), "", "") ","
     ITEM("Pod", "", "", "", "", "") "," ITEM("Container", "", "", CPU("2"), "", "") "]}}]",
     "{'metadata':{'annotations':{'kubernetes.io/limit-ranger':"
     "'LimitRanger plugin set: cpu limit for container a'}},"
     "'spec':{'containers':[{'name':'a','resources':{'limits':{'cpu':'2'}}}]}}"},
    {"Pod items give no defaults",
     "{'spec':{'containers':[{'name':'a'}]}}", LR("Pod", "", "", CPU("1"), CPU("1"), ""),
     "{'spec':{'containers':[{'name':'a'}]}}"},
};

static void test_default(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof default_rows / sizeof default_rows[0]; i++) {
        json_t *pod = J(default_rows[i].pod);
        json_t *lrs = J(default_rows[i].limitranges);
        json_t *want = J(default_rows[i].want);
        json_t *objs[8];
        size_t n = json_array_size(lrs);
        td_err err = {{0}};

        assert_true(n <= 8);
        for (size_t k = 0; k < n; k++)
            objs[k] = json_array_get(lrs, k);
        json_t *pod2 = json_deep_copy(pod);
        td_limitranges *parsed = NULL;
        td_status st = td_limitrange_default(pod, objs, n, &err);
        if (td_limitranges_parse(objs, n, &parsed, &err) != TD_OK ||
            td_limitrange_default_parsed(pod2, parsed, &err) != TD_OK || !json_equal(pod2, want)) {
            print_message("%s: parsed path differs (%s)\n", default_rows[i].name, err.msg);
            failed++;
        }
        /* td_admit_pod's path: the pod's parse kept and given the defaults,
         * only the containers defaulted copied */
        json_t *pod3 = J(default_rows[i].pod);
        td__pod kept, fresh;
        if (td__pod_parse(pod3, &kept, NULL) != TD_OK ||
            td__limitrange_default_update(pod3, parsed, &kept, &err) != TD_OK ||
            !json_equal(pod3, want) || td__pod_parse(pod3, &fresh, NULL) != TD_OK) {
            print_message("%s: kept-parse path differs (%s)\n", default_rows[i].name, err.msg);
            failed++;
        } else {
            if (!td__pod_same(&kept, &fresh)) {
                print_message("%s: kept parse differs from a fresh one\n", default_rows[i].name);
                failed++;
            }
            td__pod_fini(&fresh);
        }
        td__pod_fini(&kept);
        json_decref(pod3);
        td_limitranges_destroy(parsed);
        json_decref(pod2);
        if (st != TD_OK) {
            print_message("%s: status %d (%s)\n", default_rows[i].name, st, err.msg);
            failed++;
        } else if (!json_equal(pod, want)) {
            char *got = json_dumps(pod, JSON_SORT_KEYS | JSON_COMPACT);
            print_message("%s: got %s\n", default_rows[i].name, got);
            free(got);
            failed++;
        }
        json_decref(want);
        json_decref(lrs);
        json_decref(pod);
    }
    if (failed)
        fail_msg("%d default row(s) failed", failed);
}

/* A failed call changes nothing. */
static void test_failure_leaves_pod(void **state)
{
    (void)state;
    json_t *pod = J(POD1("p", "", ""));
    json_t *before = json_deep_copy(pod);
    json_t *lrs = J("[" "{'metadata':{'name':'abc'},'spec':{'limits':[" ITEM("Container", "", "", CPU("1"), "", "") "]}},"
                    "{'metadata':{'name':'bad'},'spec':{'limits':[" ITEM("Container", "", "", CPU("1y"), "", "") "]}}]");
    json_t *objs[2] = {json_array_get(lrs, 0), json_array_get(lrs, 1)};
    td_err err = {{0}};

    assert_int_equal(td_limitrange_default(pod, objs, 2, &err), TD_EINVAL);
    assert_string_equal(err.msg, "LimitRange \"bad\": spec.limits[0].default.cpu: \"1y\" is not a quantity");
    assert_true(json_equal(pod, before));
    assert_int_equal(td_limitrange_validate(pod, objs, 2, NULL), TD_EINVAL);
    td_limitranges *parsed = NULL;
    assert_int_equal(td_limitranges_parse(objs, 2, &parsed, &err), TD_EINVAL);
    assert_string_equal(err.msg, "LimitRange \"bad\": spec.limits[0].default.cpu: \"1y\" is not a quantity");
    assert_null(parsed);
    /* No LimitRange: nothing to default, the pod untouched. */
    assert_int_equal(td_limitranges_parse(NULL, 0, &parsed, &err), TD_OK);
    assert_int_equal(td_limitrange_default_parsed(pod, parsed, &err), TD_OK);
    assert_int_equal(td_limitrange_validate_parsed(pod, NULL, parsed, &err), TD_OK);
    assert_int_equal(td_limitrange_default_parsed(pod, NULL, &err), TD_OK);
    assert_true(json_equal(pod, before));
    td_limitranges_destroy(parsed);
    json_decref(lrs);
    json_decref(before);
    json_decref(pod);
}

/* Runs the three defaulting paths (JSON, parsed, td_admit_pod's kept
 * parse) on copies of pod with LimitRange lr; each must return want_st,
 * and on TD_OK leave the same pod (returned, the caller's) with the
 * annotation want_note; on an error each leaves its pod unchanged. */
static json_t *default_three(const json_t *pod, json_t *lr, td_status want_st,
                             const char *want_note)
{
    json_t *objs[1] = {lr};
    json_t *p1 = json_deep_copy(pod), *p2 = json_deep_copy(pod), *p3 = json_deep_copy(pod);
    td_limitranges *parsed = NULL;
    td_err err = {{0}};
    td__pod kept;

    assert_int_equal(td_limitrange_default(p1, objs, 1, &err), want_st);
    assert_int_equal(td_limitranges_parse(objs, 1, &parsed, &err), TD_OK);
    assert_int_equal(td_limitrange_default_parsed(p2, parsed, &err), want_st);
    assert_int_equal(td__pod_parse(p3, &kept, NULL), TD_OK);
    assert_int_equal(td__limitrange_default_update(p3, parsed, &kept, &err), want_st);
    if (want_st != TD_OK) {
        assert_true(json_equal(p1, pod));
        assert_true(json_equal(p2, pod));
        assert_true(json_equal(p3, pod));
    } else {
        const char *note = json_string_value(json_object_get(
            json_object_get(json_object_get(p1, "metadata"), "annotations"),
            TD_LIMITRANGE_ANNOTATION));
        assert_non_null(note);
        assert_string_equal(note, want_note);
        assert_true(json_equal(p1, p2));
        assert_true(json_equal(p1, p3));
        td__pod fresh;
        assert_int_equal(td__pod_parse(p3, &fresh, NULL), TD_OK);
        assert_true(td__pod_same(&kept, &fresh));
        td__pod_fini(&fresh);
    }
    td__pod_fini(&kept);
    td_limitranges_destroy(parsed);
    json_decref(p2);
    json_decref(p3);
    if (want_st != TD_OK) {
        json_decref(p1);
        return NULL;
    }
    return p1;
}

/* A LimitRange of one Container item whose default and defaultRequest
 * are n resources named PREFIXnn, each "1". */
static json_t *many_defaults_lr(size_t n, const char *prefix)
{
    json_t *def = json_object(), *req = json_object();
    char name[300];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s%02zu", prefix, i);
        json_object_set_new(def, name, json_string("1"));
        json_object_set_new(req, name, json_string("1"));
    }
    json_t *item = json_pack("{s:s, s:o, s:o}", "type", "Container", "default", def,
                             "defaultRequest", req);
    return json_pack("{s:{s:s}, s:{s:[o]}}", "metadata", "name", "many", "spec", "limits",
                     item);
}

/* The annotation's edges: more defaults than merge_container marks on
 * its stack, names past TD_ERR_MAX, container and resource names that are
 * not ASCII or not UTF-8. Every path answers as the JSON one does. */
static void test_default_edges(void **state)
{
    (void)state;
    char want[8192], names[4096];
    size_t o = 0;

    /* 40 defaults (more than ADDED_STACK): all set, named in order */
    json_t *lr = many_defaults_lr(40, "example.com/r");
    for (size_t i = 0; i < 40; i++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%sexample.com/r%02zu", i ? ", " : "", i);
    snprintf(want, sizeof want,
             "LimitRanger plugin set: %s request for container a; %s limit for container a", names,
             names);
    json_t *pod = J("{'spec':{'containers':[{'name':'a'}]}}");
    json_t *got = default_three(pod, lr, TD_OK, want);
    json_t *lims = json_object_get(json_object_get(
        json_object_get(json_array_get(json_object_get(json_object_get(got, "spec"), "containers"), 0),
                        "resources"),
        "limits"), "example.com/r39");
    assert_string_equal(json_string_value(lims), "1");
    json_decref(got);
    json_decref(lr);

    /* the names set in one list joined past TD_ERR_MAX: out of memory, as
     * the message buffer always said, and nothing applied */
    char prefix[200];
    memset(prefix, 'x', sizeof prefix - 1);
    prefix[sizeof prefix - 1] = '\0';
    lr = many_defaults_lr(12, prefix); /* 12 x 201 + 11 x 2 > 2048 */
    assert_null(default_three(pod, lr, TD_ENOMEM, NULL));
    json_decref(lr);
    lr = many_defaults_lr(10, prefix); /* 10 x 201 + 9 x 2 = 2028: fits */
    o = 0;
    for (size_t i = 0; i < 10; i++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s%s%02zu", i ? ", " : "", prefix, i);
    snprintf(want, sizeof want,
             "LimitRanger plugin set: %s request for container a; %s limit for container a", names,
             names);
    json_decref(default_three(pod, lr, TD_OK, want));
    json_decref(lr);
    json_decref(pod);

    /* a container name in UTF-8, not ASCII: in the annotation as it is */
    json_t *arr = J(LR("Container", "", "", CPU("1"), "", ""));
    lr = json_incref(json_array_get(arr, 0));
    json_decref(arr);
    pod = J("{'spec':{'containers':[{'name':'caf\xc3\xa9'}]}}");
    json_decref(default_three(pod, lr, TD_OK,
                              "LimitRanger plugin set: cpu limit for container caf\xc3\xa9"));
    json_decref(pod);

    /* a container name that is not UTF-8 (a parser that does not check):
     * the annotation cannot be a JSON string, and nothing is applied */
    pod = J("{'spec':{'containers':[{'name':'x'}]}}");
    json_object_set_new(json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0),
                        "name", json_stringn_nocheck("\xff", 1));
    assert_null(default_three(pod, lr, TD_ENOMEM, NULL));
    json_decref(pod);
    json_decref(lr);

    /* a default's resource name that is not UTF-8: cannot be a key */
    lr = many_defaults_lr(1, "r");
    json_t *def = json_object_get(json_array_get(json_object_get(json_object_get(lr, "spec"), "limits"), 0),
                                  "default");
    json_object_set_new_nocheck(def, "\xfe", json_string("1"));
    pod = J("{'spec':{'containers':[{'name':'a'}]}}");
    assert_null(default_three(pod, lr, TD_ENOMEM, NULL));
    json_decref(pod);
    json_decref(lr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admit),
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_failure_leaves_pod),
        cmocka_unit_test(test_default_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
