/* test_quota.c - ResourceQuota admission for pods against Kubernetes' own
 * cases, ported from plugin/pkg/admission/resourcequota/admission_test.go
 * (TestAdmitBelowQuotaLimit, TestAdmitDryRun, TestAdmitExceedQuotaLimit,
 * TestAdmitEnforceQuotaConstraints, TestAdmitPodInNamespaceWithoutQuota,
 * TestAdmitBelowTerminatingQuotaLimit, TestAdmitBelowBestEffortQuotaLimit,
 * TestAdmitBestEffortQuotaLimitIgnoresBurstable, TestAdmissionIgnoresSubresources
 * (its create half), TestAdmitWhenUnrelatedResourceExceedsQuota,
 * TestAdmitLimitedScopeWithCoverQuota's quota-only cases, TestHasUsageStats)
 * and from pkg/quota/v1/evaluator/core/pods_test.go (TestPodEvaluatorUsage:
 * each pod's usage shows in full as the "requested" list of a quota of
 * zeros; TestPodConstraintsFunc). Not ported: the LimitedResources
 * admission configuration (not part of this API), updates and
 * subresources. JSON is written with ' for ". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admission/podres_internal.h"
#include "admission/quota.h"
#include "core/config.h"
#include "kinds/builtin.h"

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

#define CPU(x) "'cpu':'" x "'"
#define MEM(x) "'memory':'" x "'"
#define CM(c, m) CPU(c) "," MEM(m)
#define CTR(name, req, lim)                                                                      \
    "{'name':'" name "','resources':{'requests':{" req "},'limits':{" lim "}}}"
#define SPEC_POD(name, spec) "{'metadata':{'name':'" name "','namespace':'test'},'spec':{" spec "}}"
/* validPod(name, 1, getResourceRequirements(req, lim)) */
#define POD(name, req, lim) SPEC_POD(name, "'containers':[" CTR("foo-0", req, lim) "]")
#define POD_EXTRA(name, req, lim, extra)                                                         \
    SPEC_POD(name, "'containers':[" CTR("foo-0", req, lim) "]," extra)
/* A quota with status.hard and status.used. */
#define Q(name, hard, used)                                                                      \
    "{'metadata':{'name':'" name "','namespace':'test'},'status':{'hard':{" hard "},'used':{" used \
    "}}}"
#define QS(name, spec, hard, used)                                                               \
    "{'metadata':{'name':'" name "','namespace':'test'},'spec':{" spec "},"                      \
    "'status':{'hard':{" hard "},'used':{" used "}}}"
#define SCOPES(...) "'scopes':[" __VA_ARGS__ "]"
#define SELECTOR(scope, op, values)                                                              \
    "'scopeSelector':{'matchExpressions':[{'scopeName':'" scope "','operator':'" op            \
    "','values':[" values "]}]}"
/* The quota of TestAdmitBelowQuotaLimit and friends. */
#define STD_HARD CPU("3") "," MEM("100Gi") ",'pods':'5'"
#define STD_USED CPU("1") "," MEM("50Gi") ",'pods':'3'"
/* Every pod resource at zero: "requested" then lists the pod's usage. */
#define ZERO_NAMES(v)                                                                            \
    "'count/pods':'" v "','pods':'" v "','cpu':'" v "','requests.cpu':'" v "','limits.cpu':'" v \
    "','memory':'" v "','requests.memory':'" v "','limits.memory':'" v "',"                     \
    "'ephemeral-storage':'" v "','requests.ephemeral-storage':'" v                              \
    "','limits.ephemeral-storage':'" v "','hugepages-2Mi':'" v "','requests.hugepages-2Mi':'" v \
    "','requests.example.com/dongle':'" v "'"
/* Only the names a pod without cpu/memory may be charged for (a quota on
 * cpu or memory would demand them). */
#define ZERO_NONCM(v)                                                                            \
    "'count/pods':'" v "','pods':'" v "','ephemeral-storage':'" v                               \
    "','requests.ephemeral-storage':'" v "','limits.ephemeral-storage':'" v                     \
    "','hugepages-2Mi':'" v "','requests.hugepages-2Mi':'" v                                     \
    "','requests.example.com/dongle':'" v "'"

static const struct {
    const char *name;
    const char *pod;
    const char *quotas;    /* JSON array */
    const char *used_pods; /* JSON array, or NULL to use status.used */
    td_status st;
    const char *msg;
} rows[] = {
    /* At the limit, and a milli-CPU over it, in each source of usage: the
     * fast check (hard - used, compared once) must draw the same line. */
    {"exactly at the limit", POD("at", CM("2", "50Gi"), ""),
     "[" Q("quota", STD_HARD, STD_USED) "]", NULL, TD_OK, ""},
    {"one milli-CPU over", POD("over", CM("2001m", "1Gi"), ""),
     "[" Q("quota", STD_HARD, STD_USED) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: quota, requested: cpu=2001m, used: cpu=1, limited: cpu=3"},
    {"at the limit from no used pods", POD("at", CM("3", "1Gi"), ""),
     "[" QS("quota", "'hard':{" STD_HARD "}", STD_HARD, STD_USED) "]", "[]", TD_OK, ""},
    {"over the limit from no used pods", POD("over", CM("3001m", "1Gi"), ""),
     "[" QS("quota", "'hard':{" STD_HARD "}", STD_HARD, STD_USED) "]", "[]", TD_EFORBIDDEN,
     "exceeded quota: quota, requested: cpu=3001m, used: cpu=0, limited: cpu=3"},
    /* admission_test.go */
    {"TestAdmitBelowQuotaLimit", POD("allowed-pod", CM("100m", "2Gi"), ""),
     "[" Q("quota", STD_HARD, STD_USED) "]", NULL, TD_OK, ""},
    {"TestAdmitDryRun too-large-pod", POD("too-large-pod", CM("100m", "60Gi"), ""),
     "[" Q("quota", STD_HARD, STD_USED) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: quota, requested: memory=60Gi, used: memory=50Gi, limited: memory=100Gi"},
    {"TestAdmitExceedQuotaLimit", POD("not-allowed-pod", CM("3", "2Gi"), ""),
     "[" Q("quota", STD_HARD, STD_USED) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: quota, requested: cpu=3, used: cpu=1, limited: cpu=3"},
    {"TestAdmitEnforceQuotaConstraints", POD("not-allowed-pod", CM("100m", "2Gi"), CPU("200m")),
     "[" Q("quota", STD_HARD ",'limits.memory':'200Gi'", STD_USED ",'limits.memory':'100Gi'") "]",
     NULL, TD_EFORBIDDEN, "failed quota: quota: must specify limits.memory for: foo-0"},
    {"TestAdmitPodInNamespaceWithoutQuota", POD("allowed-pod", CM("100m", "2Gi"), CPU("200m")), "[]",
     NULL, TD_OK, ""},
    {"TestAdmitBelowTerminatingQuotaLimit",
     POD_EXTRA("allowed-pod", CM("100m", "2Gi"), "", "'activeDeadlineSeconds':30"),
     "[" QS("quota-non-terminating", SCOPES("'NotTerminating'"), STD_HARD, STD_USED) ","
     QS("quota-terminating", SCOPES("'Terminating'"), STD_HARD, STD_USED) "]",
     NULL, TD_OK, ""},
    {"terminating pod charged to the terminating quota only",
     POD_EXTRA("p", CM("100m", "2Gi"), "", "'activeDeadlineSeconds':30"),
     "[" QS("quota-non-terminating", SCOPES("'NotTerminating'"), STD_HARD, CPU("3") "," MEM("50Gi") ",'pods':'5'") ","
     QS("quota-terminating", SCOPES("'Terminating'"), STD_HARD, STD_USED) "]",
     NULL, TD_OK, ""},
    {"terminating quota full",
     POD_EXTRA("p", CM("100m", "2Gi"), "", "'activeDeadlineSeconds':0"),
     "[" QS("quota-non-terminating", SCOPES("'NotTerminating'"), STD_HARD, STD_USED) ","
     QS("quota-terminating", SCOPES("'Terminating'"), STD_HARD, CPU("3") "," MEM("50Gi") ",'pods':'5'") "]",
     NULL, TD_EFORBIDDEN,
     "exceeded quota: quota-terminating, requested: cpu=100m,pods=1, used: cpu=3,pods=5, limited: cpu=3,pods=5"},
    {"negative deadline is not terminating",
     POD_EXTRA("p", CM("100m", "2Gi"), "", "'activeDeadlineSeconds':-1"),
     "[" QS("quota-terminating", SCOPES("'Terminating'"), "'pods':'0'", "'pods':'0'") "]", NULL, TD_OK, ""},
    {"TestAdmitBelowBestEffortQuotaLimit", POD("allowed-pod", "", ""),
     "[" QS("quota-besteffort", SCOPES("'BestEffort'"), "'pods':'5'", "'pods':'3'") ","
     QS("quota-not-besteffort", SCOPES("'NotBestEffort'"), "'pods':'5'", "'pods':'3'") "]",
     NULL, TD_OK, ""},
    {"best effort quota full", POD("p", "", ""),
     "[" QS("quota-besteffort", SCOPES("'BestEffort'"), "'pods':'5'", "'pods':'5'") ","
     QS("quota-not-besteffort", SCOPES("'NotBestEffort'"), "'pods':'5'", "'pods':'3'") "]",
     NULL, TD_EFORBIDDEN, "exceeded quota: quota-besteffort, requested: pods=1, used: pods=5, limited: pods=5"},
    {"TestAdmitBestEffortQuotaLimitIgnoresBurstable", POD("allowed-pod", CM("100m", "1Gi"), ""),
     "[" QS("quota-besteffort", SCOPES("'BestEffort'"), "'pods':'5'", "'pods':'5'") "]", NULL, TD_OK, ""},
    {"zero requests are best effort", POD("p", CM("0", "0"), ""),
     "[" QS("quota-besteffort", SCOPES("'BestEffort'"), "'pods':'1'", "'pods':'1'") "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: quota-besteffort, requested: pods=1, used: pods=1, limited: pods=1"},
    {"status.qosClass decides",
     "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a'}]},'status':{'qosClass':'Burstable'}}",
     "[" QS("q", SCOPES("'NotBestEffort'"), "'pods':'1'", "'pods':'1'") "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"},
    {"TestAdmissionIgnoresSubresources (create)", POD("123", CM("100m", "2Gi"), ""),
     "[" Q("quota", MEM("2Gi"), MEM("1Gi")) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: quota, requested: memory=2Gi, used: memory=1Gi, limited: memory=2Gi"},
    {"TestAdmitWhenUnrelatedResourceExceedsQuota", POD("allowed-pod", "", ""),
     "[" Q("quota", "'services':'3','pods':'4'", "'services':'4','pods':'1'") "]", NULL, TD_OK, ""},
    {"quota of other resources only is ignored", POD("p", "", ""),
     "[" Q("quota", "'services':'0','requests.storage':'0'", "") "]", NULL, TD_OK, ""},
    /* TestAdmitLimitedScopeWithCoverQuota, the cases decided by the quota */
    {"PriorityClass Exists quota exceeded",
     POD_EXTRA("not-allowed-pod", CM("3", "20Gi"), "", "'priorityClassName':'fake-priority'"),
     "[" QS("quota", "'scopeSelector':{'matchExpressions':[{'scopeName':'PriorityClass','operator':'Exists'}]}",
            MEM("10Gi"), MEM("1Gi")) "]",
     NULL, TD_EFORBIDDEN, "exceeded quota: quota, requested: memory=20Gi, used: memory=1Gi, limited: memory=10Gi"},
    {"PriorityClass Exists does not match a pod without one", POD("p", CM("3", "20Gi"), ""),
     "[" QS("quota", "'scopeSelector':{'matchExpressions':[{'scopeName':'PriorityClass','operator':'Exists'}]}",
            MEM("10Gi"), MEM("1Gi")) "]",
     NULL, TD_OK, ""},
    {"PriorityClass In matches",
     POD_EXTRA("p", CM("3", "2Gi"), "", "'priorityClassName':'cluster-services'"),
     "[" QS("quota", SELECTOR("PriorityClass", "In", "'another-priorityclass-name','cluster-services'"), "'pods':'1'", "'pods':'1'") "]",
     NULL, TD_EFORBIDDEN, "exceeded quota: quota, requested: pods=1, used: pods=1, limited: pods=1"},
    {"PriorityClass In other class",
     POD_EXTRA("p", CM("3", "2Gi"), "", "'priorityClassName':'fake-priority'"),
     "[" QS("quota", SELECTOR("PriorityClass", "In", "'cluster-services'"), "'pods':'1'", "'pods':'1'") "]",
     NULL, TD_OK, ""},
    {"PriorityClass NotIn matches a pod without class", POD("p", CM("3", "2Gi"), ""),
     "[" QS("quota", SELECTOR("PriorityClass", "NotIn", "'cluster-services'"), "'pods':'1'", "'pods':'1'") "]",
     NULL, TD_EFORBIDDEN, "exceeded quota: quota, requested: pods=1, used: pods=1, limited: pods=1"},
    {"PriorityClass NotIn excludes the class",
     POD_EXTRA("p", CM("3", "2Gi"), "", "'priorityClassName':'cluster-services'"),
     "[" QS("quota", SELECTOR("PriorityClass", "NotIn", "'cluster-services'"), "'pods':'1'", "'pods':'1'") "]",
     NULL, TD_OK, ""},
    {"PriorityClass DoesNotExist", POD("p", "", ""),
     "[" QS("quota", SELECTOR("PriorityClass", "DoesNotExist", ""), "'pods':'1'", "'pods':'1'") "]",
     NULL, TD_EFORBIDDEN, "exceeded quota: quota, requested: pods=1, used: pods=1, limited: pods=1"},
    {"scopes and selector all must match",
     POD_EXTRA("p", "", "", "'priorityClassName':'high'"),
     "[" QS("quota", SCOPES("'NotBestEffort'") "," SELECTOR("PriorityClass", "In", "'high'"), "'pods':'1'", "'pods':'1'") "]",
     NULL, TD_OK, ""},
    {"bad selector operator",
     POD("p", "", ""),
     "[" QS("quota", SELECTOR("PriorityClass", "Near", "'high'"), "'pods':'1'", "'pods':'0'") "]",
     NULL, TD_EINVAL,
     "error matching scopes of quota quota, err: error on matching scope {PriorityClass Near [high]}: "
     "failed to parse and convert selector: \"Near\" is not a valid scope selector operator"},
    {"In without values",
     POD("p", "", ""),
     "[" QS("quota", SELECTOR("PriorityClass", "In", ""), "'pods':'1'", "'pods':'0'") "]",
     NULL, TD_EINVAL,
     "error matching scopes of quota quota, err: error on matching scope {PriorityClass In []}: "
     "failed to parse and convert selector: values: Invalid value: []string{}: for 'in', 'notin' "
     "operators, values set can't be empty"},
    {"CrossNamespacePodAffinity scope",
     POD_EXTRA("p", "", "", "'affinity':{'podAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':"
               "[{'topologyKey':'zone','namespaces':['other']}]}}"),
     "[" QS("quota", SCOPES("'CrossNamespacePodAffinity'"), "'pods':'0'", "'pods':'0'") "]",
     NULL, TD_EFORBIDDEN, "exceeded quota: quota, requested: pods=1, used: pods=0, limited: pods=0"},
    {"CrossNamespacePodAffinity scope, same namespace",
     POD_EXTRA("p", "", "", "'affinity':{'podAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':"
               "[{'topologyKey':'zone'}]}}"),
     "[" QS("quota", SCOPES("'CrossNamespacePodAffinity'"), "'pods':'0'", "'pods':'0'") "]",
     NULL, TD_OK, ""},
    /* TestHasUsageStats via the admission path */
    {"status unknown", POD("p", CM("1", "1Gi"), ""),
     "[" Q("quota", CPU("3") ",'pods':'4','services':'1'", "'pods':'1'") "]", NULL, TD_EFORBIDDEN,
     "status unknown for quota: quota, resources: cpu,pods"},
    {"status known", POD("p", CM("1", "1Gi"), ""),
     "[" Q("quota", CPU("3") ",'services':'1'", CPU("1")) "]", NULL, TD_OK, ""},

    /* pods_test.go TestPodConstraintsFunc */
    {"init container resource missing",
     SPEC_POD("p", "'initContainers':[{'name':'dummy','resources':{'requests':{" CPU("1m") "},'limits':{" CPU("2m") "}}}]"),
     "[" Q("quota", MEM("1Gi"), MEM("0")) "]", NULL, TD_EFORBIDDEN,
     "failed quota: quota: must specify memory for: dummy"},
    {"multiple containers missing memory info",
     SPEC_POD("p", "'containers':[" CTR("foo", CPU("1m"), CPU("2m")) "," CTR("bar", CPU("1m"), CPU("2m")) "]"),
     "[" Q("quota", MEM("1Gi"), MEM("0")) "]", NULL, TD_EFORBIDDEN,
     "failed quota: quota: must specify memory for: bar,foo"},
    {"container resource missing multiple",
     SPEC_POD("p", "'containers':[{'name':'foo'}]"),
     "[" Q("quota", CM("1", "1Gi"), CM("0", "0")) "]", NULL, TD_EFORBIDDEN,
     "failed quota: quota: must specify cpu for: foo; memory for: foo"},
    {"limits and requests, containers and init containers",
     SPEC_POD("p", "'containers':[" CTR("b", CM("1", "1Gi"), CPU("1")) "," CTR("a", CPU("1"), "") "],"
              "'initContainers':[" CTR("c", MEM("1Gi"), MEM("1Gi")) "]"),
     "[" Q("quota", "'requests.cpu':'9','limits.memory':'9Gi','requests.memory':'9Gi'", "") "]", NULL, TD_EFORBIDDEN,
     "failed quota: quota: must specify limits.memory for: a,b; requests.cpu for: c; requests.memory for: a"},
    {"ephemeral-storage is not demanded", POD("p", "", ""),
     "[" Q("quota", "'requests.ephemeral-storage':'1Gi'", "'requests.ephemeral-storage':'0'") "]", NULL, TD_OK, ""},
    {"pod-level resources lift the demand",
     SPEC_POD("p", "'resources':{'requests':{" CM("1", "1Gi") "},'limits':{" CM("1", "1Gi") "}},'containers':[{'name':'foo'}]"),
     "[" Q("quota", CM("2", "2Gi") ",'limits.cpu':'1'", CM("1500m", "0") ",'limits.cpu':'0'") "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: quota, requested: cpu=1, used: cpu=1500m, limited: cpu=2"},
    {"constraints of every quota come before any usage",
     POD("p", CPU("5"), ""),
     "[" Q("small", CPU("1"), CPU("0")) "," Q("mem", MEM("1Gi"), MEM("0")) "]", NULL, TD_EFORBIDDEN,
     "failed quota: mem: must specify memory for: foo-0"},
    {"first exceeded quota in order is reported",
     POD("p", CM("2", "2Gi"), ""),
     "[" Q("b-mem", MEM("1Gi"), MEM("0")) "," Q("a-cpu", CPU("1"), CPU("0")) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: b-mem, requested: memory=2Gi, used: memory=0, limited: memory=1Gi"},
    {"several names exceeded in one quota",
     POD("p", CM("2", "2Gi"), CM("4", "2Gi")),
     "[" Q("q", CM("1", "3Gi") ",'limits.cpu':'3','requests.memory':'1Gi'", CM("0", "0") ",'limits.cpu':'0','requests.memory':'0'") "]",
     NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: cpu=2,limits.cpu=4,requests.memory=2Gi, used: cpu=0,limits.cpu=0,requests.memory=0, "
     "limited: cpu=1,limits.cpu=3,requests.memory=1Gi"},
    {"exactly at the limit fits", POD("p", CM("2", "1Gi"), ""),
     "[" Q("q", CM("3", "2Gi"), CM("1", "1Gi")) "]", NULL, TD_OK, ""},
    {"zero request changes no quota", POD("p", CM("0", "0"), ""),
     "[" Q("q", CM("0", "0"), CM("0", "0")) "]", NULL, TD_OK, ""},
    {"extended resource", POD("p", "'nvidia.com/gpu':'2'", "'nvidia.com/gpu':'2'"),
     "[" Q("gpu", "'requests.nvidia.com/gpu':'2'", "'requests.nvidia.com/gpu':'1'") "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: gpu, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=2"},
    {"extended resource without requests. prefix is not tracked", POD("p", "'nvidia.com/gpu':'2'", "'nvidia.com/gpu':'2'"),
     "[" Q("gpu", "'nvidia.com/gpu':'1'", "'nvidia.com/gpu':'1'") "]", NULL, TD_OK, ""},
    {"ephemeral storage", POD("p", "'ephemeral-storage':'600Mi'", ""),
     "[" Q("q", "'requests.ephemeral-storage':'1Gi'", "'requests.ephemeral-storage':'512Mi'") "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: requests.ephemeral-storage=600Mi, used: requests.ephemeral-storage=512Mi, "
     "limited: requests.ephemeral-storage=1Gi"},
    {"count/pods", POD("p", "", ""), "[" Q("q", "'count/pods':'2'", "'count/pods':'2'") "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: count/pods=1, used: count/pods=2, limited: count/pods=2"},
    {"negative usage", POD("p", CM("-1", "1Gi"), ""), "[" Q("q", "'pods':'9'", "'pods':'0'") "]", NULL,
     TD_EFORBIDDEN, "quota usage is negative for resource(s): cpu,requests.cpu"},
    {"overhead and init containers charged",
     SPEC_POD("p", "'overhead':{'cpu':'250m'},'containers':[" CTR("a", CPU("1"), "") "],"
              "'initContainers':[" CTR("i", CPU("2"), "") "]"),
     "[" Q("q", "'requests.cpu':'2'", "'requests.cpu':'0'") "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: requests.cpu=2250m, used: requests.cpu=0, limited: requests.cpu=2"},
    {"terminal pod charged count/pods only",
     "{'metadata':{'name':'p'},'spec':{'containers':[" CTR("a", CM("1", "1Gi"), "") "]},'status':{'phase':'Succeeded'}}",
     "[" Q("q", CM("0", "0") ",'pods':'0'", CM("0", "0") ",'pods':'0'") "]", NULL, TD_OK, ""},

    /* pods_test.go TestPodEvaluatorUsage: the usage is the "requested" list */
    {"usage: init container CPU",
     SPEC_POD("p", "'initContainers':[" CTR("i", CPU("1m"), CPU("2m")) "]"),
     "[" Q("q", "'cpu':'0','requests.cpu':'0','limits.cpu':'0'," ZERO_NONCM("0"), "'cpu':'0','requests.cpu':'0','limits.cpu':'0'," ZERO_NONCM("0")) "]",
     NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: count/pods=1,cpu=1m,limits.cpu=2m,pods=1,requests.cpu=1m, "
     "used: count/pods=0,cpu=0,limits.cpu=0,pods=0,requests.cpu=0, limited: count/pods=0,cpu=0,limits.cpu=0,pods=0,requests.cpu=0"},
    {"usage: container MEM",
     SPEC_POD("p", "'containers':[" CTR("c", MEM("1m"), MEM("2m")) "]"),
     "[" Q("q", "'memory':'0','requests.memory':'0','limits.memory':'0'", "'memory':'0','requests.memory':'0','limits.memory':'0'") "]",
     NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: limits.memory=2m,memory=1m,requests.memory=1m, "
     "used: limits.memory=0,memory=0,requests.memory=0, limited: limits.memory=0,memory=0,requests.memory=0"},
    {"usage: init container local ephemeral storage",
     SPEC_POD("p", "'initContainers':[" CTR("i", "'ephemeral-storage':'32Mi'", "'ephemeral-storage':'64Mi'") "]"),
     "[" Q("q", ZERO_NONCM("0"), ZERO_NONCM("0")) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: count/pods=1,ephemeral-storage=32Mi,limits.ephemeral-storage=64Mi,pods=1,requests.ephemeral-storage=32Mi, "
     "used: count/pods=0,ephemeral-storage=0,limits.ephemeral-storage=0,pods=0,requests.ephemeral-storage=0, "
     "limited: count/pods=0,ephemeral-storage=0,limits.ephemeral-storage=0,pods=0,requests.ephemeral-storage=0"},
    {"usage: container hugepages",
     SPEC_POD("p", "'containers':[" CTR("c", "'hugepages-2Mi':'100Mi'", "") "]"),
     "[" Q("q", ZERO_NONCM("0"), ZERO_NONCM("0")) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: count/pods=1,hugepages-2Mi=100Mi,pods=1,requests.hugepages-2Mi=100Mi, "
     "used: count/pods=0,hugepages-2Mi=0,pods=0,requests.hugepages-2Mi=0, "
     "limited: count/pods=0,hugepages-2Mi=0,pods=0,requests.hugepages-2Mi=0"},
    {"usage: init container extended resources",
     SPEC_POD("p", "'initContainers':[" CTR("i", "'example.com/dongle':'3'", "'example.com/dongle':'3'") "]"),
     "[" Q("q", ZERO_NONCM("0"), ZERO_NONCM("0")) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: count/pods=1,pods=1,requests.example.com/dongle=3, "
     "used: count/pods=0,pods=0,requests.example.com/dongle=0, limited: count/pods=0,pods=0,requests.example.com/dongle=0"},
    {"usage: terminated generic count still appears",
     "{'metadata':{'name':'p'},'spec':{'containers':[" CTR("c", "'example.com/dongle':'3'", "'example.com/dongle':'3'") "]},"
     "'status':{'phase':'Succeeded'}}",
     "[" Q("q", ZERO_NONCM("0"), ZERO_NONCM("0")) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: count/pods=1, used: count/pods=0, limited: count/pods=0"},
    {"usage: init container maximums override sum of containers",
     SPEC_POD("p", "'initContainers':["
              CTR("i1", "'cpu':'4','memory':'100M','example.com/dongle':'4'", "'cpu':'8','memory':'200M','example.com/dongle':'4'") ","
              CTR("i2", "'cpu':'1','memory':'50M','example.com/dongle':'2'", "'cpu':'2','memory':'100M','example.com/dongle':'2'") "],"
              "'containers':["
              CTR("c1", "'cpu':'1','memory':'50M','example.com/dongle':'1'", "'cpu':'2','memory':'100M','example.com/dongle':'1'") ","
              CTR("c2", "'cpu':'2','memory':'25M','example.com/dongle':'2'", "'cpu':'5','memory':'50M','example.com/dongle':'2'") "]"),
     "[" Q("q", ZERO_NAMES("0"), ZERO_NAMES("0")) "]", NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: count/pods=1,cpu=4,limits.cpu=8,limits.memory=200M,memory=100M,pods=1,"
     "requests.cpu=4,requests.example.com/dongle=4,requests.memory=100M, "
     "used: count/pods=0,cpu=0,limits.cpu=0,limits.memory=0,memory=0,pods=0,requests.cpu=0,requests.example.com/dongle=0,requests.memory=0, "
     "limited: count/pods=0,cpu=0,limits.cpu=0,limits.memory=0,memory=0,pods=0,requests.cpu=0,requests.example.com/dongle=0,requests.memory=0"},
    {"usage: count pod overhead as usage",
     SPEC_POD("p", "'overhead':{'cpu':'1'},'containers':[" CTR("c", CPU("1"), CPU("2")) "]"),
     "[" Q("q", "'cpu':'0','requests.cpu':'0','limits.cpu':'0','pods':'0'", "'cpu':'0','requests.cpu':'0','limits.cpu':'0','pods':'0'") "]",
     NULL, TD_EFORBIDDEN,
     "exceeded quota: q, requested: cpu=2,limits.cpu=3,pods=1,requests.cpu=2, "
     "used: cpu=0,limits.cpu=0,pods=0,requests.cpu=0, limited: cpu=0,limits.cpu=0,pods=0,requests.cpu=0"},

    /* used from the pods in the namespace instead of status.used */
    {"used pods summed", POD("p", CM("100m", "1Gi"), ""),
     "[{'metadata':{'name':'q'},'spec':{'hard':{" CPU("1") "}}}]",
     "[" POD("a", CPU("500m"), "") "," POD("b", CPU("500m"), "") "]", TD_EFORBIDDEN,
     "exceeded quota: q, requested: cpu=100m, used: cpu=1, limited: cpu=1"},
    {"used pods: terminal ones free their resources",
     POD("p", CM("100m", "1Gi"), ""),
     "[{'metadata':{'name':'q'},'spec':{'hard':{" CPU("1") ",'pods':'2'}}}]",
     "[" POD("a", CPU("500m"), "") ",{'metadata':{'name':'b'},'spec':{'containers':[" CTR("c", CPU("500m"), "") "]},'status':{'phase':'Failed'}}]",
     TD_OK, ""},
    {"used pods: terminal ones still count for count/pods",
     POD("p", "", ""),
     "[{'metadata':{'name':'q'},'spec':{'hard':{'count/pods':'2','pods':'2'}}}]",
     "[" POD("a", "", "") ",{'metadata':{'name':'b'},'status':{'phase':'Succeeded'}}]",
     TD_EFORBIDDEN, "exceeded quota: q, requested: count/pods=1, used: count/pods=2, limited: count/pods=2"},
    {"used pods: only those in the quota's scopes",
     POD("p", CM("1", "1Gi"), ""),
     "[{'metadata':{'name':'q'},'spec':{'scopes':['NotTerminating'],'hard':{" CPU("2") "}}}]",
     "[" POD("a", CPU("1"), "") "," POD_EXTRA("job", CPU("1"), "", "'activeDeadlineSeconds':60") "]",
     TD_OK, ""},
    {"used pods: nothing used prints 0",
     POD("p", CM("3", "1Gi"), ""), "[{'metadata':{'name':'q'},'spec':{'hard':{" CPU("2") "}}}]", "[]",
     TD_EFORBIDDEN, "exceeded quota: q, requested: cpu=3, used: cpu=0, limited: cpu=2"},
    {"used pods: spec.hard wins over status.hard",
     POD("p", CM("3", "1Gi"), ""),
     "[{'metadata':{'name':'q'},'spec':{'hard':{" CPU("4") "}},'status':{'hard':{" CPU("2") "}}}]", "[]",
     TD_OK, ""},

    /* malformed input */
    {"bad pod quantity", POD("p", CPU("2x"), ""), "[" Q("q", CPU("1"), CPU("0")) "]", NULL, TD_EINVAL,
     "spec.containers[0].resources.requests.cpu: \"2x\" is not a quantity"},
    {"bad quota quantity", POD("p", CPU("1"), ""), "[" Q("q", CPU("lots"), CPU("0")) "]", NULL, TD_EINVAL,
     "ResourceQuota \"q\": status.hard.cpu: \"lots\" is not a quantity"},
    {"bad used pod", POD("p", CPU("1"), ""), "[{'metadata':{'name':'q'},'spec':{'hard':{" CPU("1") "}}}]",
     "[" POD("a", CPU("1"), "") "," POD("b", MEM("1Zi"), "") "]", TD_EINVAL,
     "used_pods[1] \"b\": spec.containers[0].resources.requests.memory: \"1Zi\" is not a quantity"},
    {"scopes not an array", POD("p", "", ""), "[{'metadata':{'name':'q'},'spec':{'scopes':'BestEffort'}}]", NULL,
     TD_EINVAL, "ResourceQuota \"q\": spec.scopes: must be a list"},
    {"deadline not an integer", POD_EXTRA("p", "", "", "'activeDeadlineSeconds':'30'"), "[]", NULL, TD_EINVAL,
     "spec.activeDeadlineSeconds: must be an integer"},
};

static json_t **objects(json_t *arr, size_t *n)
{
    json_t **objs;

    *n = json_array_size(arr);
    objs = calloc(*n + 1, sizeof *objs);
    for (size_t k = 0; k < *n; k++)
        objs[k] = json_array_get(arr, k);
    return objs;
}

static void test_rows(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *pod = J(rows[i].pod);
        json_t *before = json_deep_copy(pod);
        json_t *quotas = J(rows[i].quotas);
        json_t *used = rows[i].used_pods ? J(rows[i].used_pods) : NULL;
        size_t nq, nu = 0;
        json_t **qobjs = objects(quotas, &nq);
        json_t **uobjs = used ? objects(used, &nu) : NULL;
        td_err err = {{0}};
        td_status st = td_quota_check(pod, qobjs, nq, uobjs, nu, &err);

        if (st != rows[i].st) {
            print_message("%s: status %d, want %d (%s)\n", rows[i].name, st, rows[i].st, err.msg);
            failed++;
        } else if (st != TD_OK && strcmp(err.msg, rows[i].msg) != 0) {
            print_message("%s: message\n  got  %s\n  want %s\n", rows[i].name, err.msg, rows[i].msg);
            failed++;
        }
        if (!json_equal(pod, before)) {
            print_message("%s: pod changed\n", rows[i].name);
            failed++;
        }
        /* The same from quotas parsed once (as the admission index holds
         * them), or a parse that fails where td_quota_check fails too. */
        td_quotas *parsed = NULL;
        td_err perr = {{0}};
        td_status pst = td_quotas_parse(qobjs, nq, uobjs == NULL, &parsed, &perr);
        if (pst != TD_OK) {
            if (st == TD_OK) {
                print_message("%s: parse failed: %s\n", rows[i].name, perr.msg);
                failed++;
            }
        } else {
            pst = td_quota_check_parsed(pod, NULL, parsed, uobjs, nu, &perr);
            if (pst != st || (st != TD_OK && strcmp(perr.msg, err.msg) != 0)) {
                print_message("%s: parsed path: status %d (%s), JSON path %d (%s)\n",
                              rows[i].name, pst, perr.msg, st, err.msg);
                failed++;
            }
            /* with the pod parsed by the caller too, as td_admit_pod does */
            td__pod pp;
            if (td__pod_parse(pod, &pp, NULL) == TD_OK) {
                td_err e2 = {{0}};
                td_status s2 = td_quota_check_parsed(pod, &pp, parsed, uobjs, nu, &e2);
                td__pod_fini(&pp);
                if (s2 != st || (st != TD_OK && strcmp(e2.msg, err.msg) != 0)) {
                    print_message("%s: pre-parsed pod: status %d (%s)\n", rows[i].name, s2,
                                  e2.msg);
                    failed++;
                }
            }
            /* Twice: a check leaves the parsed quotas as they were. */
            if (td_quota_check_parsed(pod, NULL, parsed, uobjs, nu, NULL) != st) {
                print_message("%s: parsed path changed by a check\n", rows[i].name);
                failed++;
            }
        }
        td_quotas_destroy(parsed);
        if (td_quota_check(pod, qobjs, nq, uobjs, nu, NULL) != st) {
            print_message("%s: different status without err\n", rows[i].name);
            failed++;
        }
        free(qobjs);
        free(uobjs);
        json_decref(used);
        json_decref(quotas);
        json_decref(before);
        json_decref(pod);
    }
    if (failed)
        fail_msg("%d row(s) failed", failed);
}

/* A hugepages-* resource NAME of length len is charged as "requests.NAME"
 * while that is a resource name (shorter than TD_RESOURCE_NAME_MAX), and
 * not at all past it. */
static td_status check_extended(size_t len, bool quota_on_it)
{
    char name[TD_RESOURCE_NAME_MAX + 16], qname[TD_RESOURCE_NAME_MAX + 32];
    snprintf(name, sizeof name, "hugepages-");
    for (size_t k = strlen(name); k < len; k++)
        name[k] = 'x';
    name[len] = '\0';
    snprintf(qname, sizeof qname, "requests.%s", name);
    json_t *pod = json_pack("{s:{s:s, s:s}, s:{s:[{s:s, s:{s:{s:s}}}]}}", "metadata", "name",
                            "p", "namespace", "test", "spec", "containers", "name", "a",
                            "resources", "requests", name, "1");
    const char *hard = quota_on_it ? qname : "pods";
    json_t *q = json_pack("{s:{s:s, s:s}, s:{s:{s:s}, s:{s:s}}}", "metadata", "name", "q",
                          "namespace", "test", "status", "hard", hard, quota_on_it ? "0" : "5",
                          "used", hard, "0");
    assert_non_null(pod);
    assert_non_null(q);
    json_t *objs[1] = {q};
    td_err err = {{0}};
    td_status st = td_quota_check(pod, objs, 1, NULL, 0, &err);
    if (st != TD_OK && strstr(err.msg, "exceeded quota: q, requested: requests.hugepages-") == NULL)
        print_message("len %zu: %s\n", len, err.msg);
    td_quotas *parsed = NULL;
    assert_int_equal(td_quotas_parse(objs, 1, true, &parsed, NULL), TD_OK);
    td__pod pp;
    assert_int_equal(td__pod_parse(pod, &pp, NULL), TD_OK);
    assert_int_equal(td_quota_check_parsed(pod, &pp, parsed, NULL, 0, NULL), st);
    td__pod_fini(&pp);
    td_quotas_destroy(parsed);
    json_decref(q);
    json_decref(pod);
    return st;
}

static void test_extended_name_lengths(void **state)
{
    (void)state;
    /* 9 + 244 = 253: charged, and over a hard of 0 */
    assert_int_equal(check_extended(TD_RESOURCE_NAME_MAX - 10, true), TD_EFORBIDDEN);
    assert_int_equal(check_extended(20, true), TD_EFORBIDDEN);
    /* 9 + 245 = 254: not a resource name, not charged (no error either) */
    assert_int_equal(check_extended(TD_RESOURCE_NAME_MAX - 9, false), TD_OK);
    assert_int_equal(check_extended(TD_RESOURCE_NAME_MAX - 1, false), TD_OK);
}

/* One parse, one message per mistake: a malformed ResourceQuota is refused
 * when the config is loaded with the message td_quota_check gives, the
 * object named the config's way ("c.yaml:1: ResourceQuota a/q: ") rather
 * than the check's ("ResourceQuota \"q\": "). The quota is written as JSON,
 * which is YAML too; from_status: the check reads status (no used pods). */
static const struct {
    const char *name;
    const char *spec_status; /* members after metadata */
    bool from_status;
    const char *msg; /* FIELD: MSG */
} one_message_rows[] = {
    {"spec.hard quantity", "'spec':{'hard':{'cpu':'2x'}}", false,
     "spec.hard.cpu: \"2x\" is not a quantity"},
    {"spec.hard boolean", "'spec':{'hard':{'cpu':true}}", false,
     "spec.hard.cpu: must be a quantity, not a boolean"},
    {"spec.hard a list", "'spec':{'hard':['cpu']}", false,
     "spec.hard: must be a map of resource name to quantity"},
    {"status.hard quantity", "'status':{'hard':{'pods':'lots'},'used':{'pods':'1'}}", true,
     "status.hard.pods: \"lots\" is not a quantity"},
    {"status.used quantity", "'status':{'hard':{'pods':'2'},'used':{'pods':'1x'}}", true,
     "status.used.pods: \"1x\" is not a quantity"},
    {"spec a list", "'spec':[1]", false, "spec: must be a mapping"},
    {"status a string", "'status':'ok'", true, "status: must be a mapping"},
    {"scopes a string", "'spec':{'scopes':'BestEffort'}", false, "spec.scopes: must be a list"},
    {"scope a number", "'spec':{'scopes':[1]}", false, "spec.scopes[0]: must be a string"},
    {"selector a list", "'spec':{'scopeSelector':[]}", false,
     "spec.scopeSelector: must be a mapping"},
    {"expressions a mapping", "'spec':{'scopeSelector':{'matchExpressions':{}}}", false,
     "spec.scopeSelector.matchExpressions: must be a list"},
    {"expression a string", "'spec':{'scopeSelector':{'matchExpressions':['x']}}", false,
     "spec.scopeSelector.matchExpressions[0]: must be a mapping"},
    {"operator missing", "'spec':{'scopeSelector':{'matchExpressions':[{'scopeName':'BestEffort'}]}}",
     false, "spec.scopeSelector.matchExpressions[0]: scopeName and operator must be strings"},
    {"values a string",
     "'spec':{'scopeSelector':{'matchExpressions':[{'scopeName':'PriorityClass','operator':'In',"
     "'values':'high'}]}}",
     false, "spec.scopeSelector.matchExpressions[0]: values: must be a list"},
    {"value a number",
     "'spec':{'scopeSelector':{'matchExpressions':[{'scopeName':'PriorityClass','operator':'In',"
     "'values':['a',2]}]}}",
     false, "spec.scopeSelector.matchExpressions[0]: values[1]: must be a string"},
};

static void test_one_message(void **state)
{
    (void)state;
    td_err err;
    assert_int_equal(td_kinds_register_builtin(&err), TD_OK);
    int failed = 0;
    for (size_t i = 0; i < sizeof one_message_rows / sizeof one_message_rows[0]; i++) {
        char text[1024], want[512];
        snprintf(text, sizeof text,
                 "{'apiVersion':'v1','kind':'ResourceQuota','metadata':{'name':'q',"
                 "'namespace':'a'},%s}",
                 one_message_rows[i].spec_status);
        json_t *q = J(text);
        for (char *p = text; *p; p++)
            if (*p == '\'')
                *p = '"';
        json_t *pod = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a'}]}}");
        json_t *objs[1] = {q};
        td_err cerr = {{0}}, lerr = {{0}};
        json_t *no_pods[1] = {NULL}; /* usage from pods, of which there are none */
        td_status cst = td_quota_check(pod, objs, 1, one_message_rows[i].from_status ? NULL : no_pods,
                                       0, &cerr);
        td_config *c = NULL;
        td_status lst = td_config_load_text("c.yaml", text, strlen(text), &c, &lerr);
        td_config_unref(c);
        snprintf(want, sizeof want, "ResourceQuota \"q\": %s", one_message_rows[i].msg);
        if (cst != TD_EINVAL || strcmp(cerr.msg, want) != 0) {
            print_message("%s: check\n  got  %s\n  want %s\n", one_message_rows[i].name,
                          cerr.msg, want);
            failed++;
        }
        snprintf(want, sizeof want, "c.yaml:1: ResourceQuota a/q: %s", one_message_rows[i].msg);
        if (lst != TD_EINVAL || strcmp(lerr.msg, want) != 0) {
            print_message("%s: config\n  got  %s\n  want %s\n", one_message_rows[i].name,
                          lerr.msg, want);
            failed++;
        }
        json_decref(pod);
        json_decref(q);
    }
    if (failed)
        fail_msg("%d check(s) failed", failed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_one_message),
        cmocka_unit_test(test_extended_name_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
