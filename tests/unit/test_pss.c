/* test_pss.c - Pod Security Standards checks give Kubernetes' verdicts and
 * messages. Rows are ported from k8s.io/pod-security-admission/policy/
 * check_*_test.go (named "<check>: <Go case name>"), plus whole-pod cases.
 * To keep the table readable, pods and messages write ' for " (no row needs a
 * real single quote). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/pss_internal.h"

/* How a row's want is compared: EXACT is the whole text after
 * `violates PodSecurity "LEVEL:latest": `; SUB is a substring. */
enum { EXACT, SUB };

typedef struct {
    const char *name;
    const char *pod;
    td_pss_level level;
    td_status status;
    int match;
    const char *want;
} row;

#define B   TD_PSS_BASELINE
#define R   TD_PSS_RESTRICTED
#define P   TD_PSS_PRIVILEGED
#define OK  TD_OK
#define NO  TD_EFORBIDDEN
#define BAD TD_EINVAL

/* A restricted-compliant pod, and the pod-level part of it that keeps the
 * restricted checks other than the one under test quiet for container "a". */
#define GOOD_SC                                                                                    \
    "'securityContext':{'allowPrivilegeEscalation':false,'capabilities':{'drop':['ALL']}}"
#define QUIET_POD                                                                                  \
    "'securityContext':{'runAsNonRoot':true,'seccompProfile':{'type':'RuntimeDefault'}}"

static const row rows[] = {
    /* ---- check_allowPrivilegeEscalation_test.go */
    {"allowPrivilegeEscalation: multiple containers",
     "{'spec':{'containers':[{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'allowPrivilegeEscalation':true}},"
     "{'name':'d','securityContext':{'allowPrivilegeEscalation':false}}]}}",
     R, NO, SUB,
     "allowPrivilegeEscalation != false (containers 'a', 'b', 'c' must set "
     "securityContext.allowPrivilegeEscalation=false)"},
    {"allowPrivilegeEscalation: windows pod, admit without checking privilegeEscalation",
     "{'spec':{'os':{'name':'windows'},'securityContext':{'runAsNonRoot':true},"
     "'containers':[{'name':'a'}]}}",
     R, OK, SUB, ""},
    {"allowPrivilegeEscalation: linux pod, reject if security context is not set",
     "{'spec':{'os':{'name':'linux'},'containers':[{'name':'a'}]}}", R, NO, SUB,
     "allowPrivilegeEscalation != false (container 'a' must set "
     "securityContext.allowPrivilegeEscalation=false)"},

    /* ---- check_appArmorProfile_test.go */
    {"appArmorProfile: container with default AppArmor + extra annotations",
     "{'metadata':{'annotations':{'container.apparmor.security.beta.kubernetes.io/test':"
     "'runtime/default','env':'prod'}},'spec':{}}",
     B, OK, SUB, ""},
    {"appArmorProfile: container with local AppArmor + extra annotations",
     "{'metadata':{'annotations':{'container.apparmor.security.beta.kubernetes.io/test':"
     "'localhost/sec-profile01','env':'dev'}},'spec':{}}",
     B, OK, SUB, ""},
    {"appArmorProfile: container with no AppArmor annotations",
     "{'metadata':{'annotations':{'env':'dev'}},'spec':{}}", B, OK, SUB, ""},
    {"appArmorProfile: container with no annotations", "{'metadata':{},'spec':{}}", B, OK, SUB, ""},
    {"appArmorProfile: pod with runtime default",
     "{'spec':{'securityContext':{'appArmorProfile':{'type':'RuntimeDefault'}}}}", B, OK, SUB, ""},
    {"appArmorProfile: container with localhost profile",
     "{'spec':{'containers':[{'name':'foo','securityContext':{'appArmorProfile':"
     "{'type':'RuntimeDefault'}}}]}}",
     B, OK, SUB, ""},
    {"appArmorProfile: unconfined pod",
     "{'spec':{'securityContext':{'appArmorProfile':{'type':'Unconfined'}}}}", B, NO, EXACT,
     "forbidden AppArmor profile (pod must not set AppArmor profile type to 'Unconfined')"},
    {"appArmorProfile: unconfined container",
     "{'spec':{'securityContext':{'appArmorProfile':{'type':'RuntimeDefault'}},"
     "'containers':[{'name':'foo','securityContext':{'appArmorProfile':{'type':'Unconfined'}}}]}}",
     B, NO, EXACT,
     "forbidden AppArmor profile (container 'foo' must not set AppArmor profile type to "
     "'Unconfined')"},
    {"appArmorProfile: unconfined init container",
     "{'spec':{'securityContext':{'appArmorProfile':{'type':'RuntimeDefault'}},"
     "'containers':[{'name':'foo'}],'initContainers':[{'name':'bar','securityContext':"
     "{'appArmorProfile':{'type':'Unconfined'}}}]}}",
     B, NO, EXACT,
     "forbidden AppArmor profile (container 'bar' must not set AppArmor profile type to "
     "'Unconfined')"},
    {"appArmorProfile: multiple containers",
     "{'metadata':{'annotations':{"
     "'container.apparmor.security.beta.kubernetes.io/':'bogus',"
     "'container.apparmor.security.beta.kubernetes.io/a':'',"
     "'container.apparmor.security.beta.kubernetes.io/b':'runtime/default',"
     "'container.apparmor.security.beta.kubernetes.io/c':'localhost/',"
     "'container.apparmor.security.beta.kubernetes.io/d':'localhost/foo',"
     "'container.apparmor.security.beta.kubernetes.io/e':'unconfined',"
     "'container.apparmor.security.beta.kubernetes.io/f':'unknown'}}}",
     B, NO, EXACT,
     "forbidden AppArmor profiles (annotations must not set AppArmor profile type to "
     "'container.apparmor.security.beta.kubernetes.io/='bogus'', "
     "'container.apparmor.security.beta.kubernetes.io/e='unconfined'', "
     "'container.apparmor.security.beta.kubernetes.io/f='unknown'')"},

    /* ---- check_capabilities_baseline_test.go */
    {"capabilities_baseline: multiple containers",
     "{'spec':{'containers':["
     "{'name':'a','securityContext':{'capabilities':{'add':['FOO','BAR']}}},"
     "{'name':'b','securityContext':{'capabilities':{'add':['BAR','BAZ']}}}]}}",
     B, NO, EXACT,
     "non-default capabilities (containers 'a', 'b' must not include 'BAR', 'BAZ', 'FOO' in "
     "securityContext.capabilities.add)"},

    /* ---- check_capabilities_restricted_test.go */
    {"capabilities_restricted: multiple containers",
     "{'spec':{'containers':["
     "{'name':'a','securityContext':{'capabilities':{'add':['FOO','BAR']}}},"
     "{'name':'b','securityContext':{'capabilities':{'add':['BAR','BAZ']}}},"
     "{'name':'c','securityContext':{'capabilities':{'add':['NET_BIND_SERVICE','CHOWN'],"
     "'drop':['ALL','FOO']}}}]}}",
     R, NO, SUB,
     "unrestricted capabilities (containers 'a', 'b' must set "
     "securityContext.capabilities.drop=['ALL']; containers 'a', 'b', 'c' must not include "
     "'BAR', 'BAZ', 'CHOWN', 'FOO' in securityContext.capabilities.add)"},
    {"capabilities_restricted: windows pod, admit without checking capabilities",
     "{'spec':{'os':{'name':'windows'},'securityContext':{'runAsNonRoot':true},"
     "'containers':[{'name':'a'}]}}",
     R, OK, SUB, ""},
    {"capabilities_restricted: linux pod, reject if security context is not set",
     "{'spec':{'os':{'name':'linux'},'containers':[{'name':'a'}]}}", R, NO, SUB,
     "unrestricted capabilities (container 'a' must set "
     "securityContext.capabilities.drop=['ALL'])"},

    /* ---- check_hostNamespaces_test.go */
    {"hostNamespaces: multiple host namespaces",
     "{'spec':{'hostNetwork':true,'hostIPC':true,'hostPID':true}}", B, NO, EXACT,
     "host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)"},

    /* ---- check_hostPathVolumes_test.go */
    {"hostPathVolumes: host path volumes",
     "{'spec':{'volumes':[{'name':'a','hostPath':{}},{'name':'b','hostPath':{}},"
     "{'name':'c','emptyDir':{}}]}}",
     B, NO, EXACT, "hostPath volumes (volumes 'a', 'b')"},

    /* ---- check_hostPorts_test.go */
    {"hostPorts: one container, one host port",
     "{'spec':{'containers':[{'name':'a','ports':[{'hostPort':0}]},"
     "{'name':'b','ports':[{'hostPort':0},{'hostPort':20}]}]}}",
     B, NO, EXACT, "hostPort (container 'b' uses hostPort 20)"},
    {"hostPorts: multiple containers, multiple host port",
     "{'spec':{'containers':[{'name':'a','ports':[{'hostPort':0}]},"
     "{'name':'b','ports':[{'hostPort':0},{'hostPort':10},{'hostPort':20}]},"
     "{'name':'c','ports':[{'hostPort':0},{'hostPort':10},{'hostPort':30}]}]}}",
     B, NO, EXACT, "hostPort (containers 'b', 'c' use hostPorts 10, 20, 30)"},

    /* ---- check_hostProbesAndhostLifecycle_test.go */
    {"hostProbesAndHostLifecycle: valid pod with unset hosts",
     "{'spec':{'containers':[{'name':'a','livenessProbe':{'httpGet':{}},"
     "'readinessProbe':{'tcpSocket':{}},'lifecycle':{'postStart':{'httpGet':{}}}}]}}",
     B, OK, SUB, ""},
    {"hostProbesAndHostLifecycle: invalid pod with local host IP as probe host",
     "{'spec':{'containers':[{'name':'a','livenessProbe':{'httpGet':{'host':'127.0.0.1'}},"
     "'readinessProbe':{'tcpSocket':{'host':'::1'}},"
     "'startupProbe':{'httpGet':{'host':'localhost'}}}]}}",
     B, NO, EXACT,
     "probe or lifecycle host (container 'a' uses probe or lifecycle hosts '127.0.0.1', '::1', "
     "'localhost')"},
    {"hostProbesAndHostLifecycle: invalid httpget host in liveness probe",
     "{'spec':{'containers':[{'name':'a','livenessProbe':{'httpGet':{'host':'invalid.host'}}}]}}",
     B, NO, EXACT,
     "probe or lifecycle host (container 'a' uses probe or lifecycle host 'invalid.host')"},
    {"hostProbesAndHostLifecycle: invalid tcpsocket host in readiness probe",
     "{'spec':{'containers':[{'name':'b','readinessProbe':{'tcpSocket':{'host':'invalid.host'}}}]"
     "}}",
     B, NO, EXACT,
     "probe or lifecycle host (container 'b' uses probe or lifecycle host 'invalid.host')"},
    {"hostProbesAndHostLifecycle: invalid httpget host in startup probe",
     "{'spec':{'containers':[{'name':'c','startupProbe':{'httpGet':{'host':'invalid.host'}}}]}}", B,
     NO, EXACT,
     "probe or lifecycle host (container 'c' uses probe or lifecycle host 'invalid.host')"},
    {"hostProbesAndHostLifecycle: invalid poststart tcpsocket host",
     "{'spec':{'containers':[{'name':'d','lifecycle':{'postStart':{'tcpSocket':"
     "{'host':'invalid.host'}}}}]}}",
     B, NO, EXACT,
     "probe or lifecycle host (container 'd' uses probe or lifecycle host 'invalid.host')"},
    {"hostProbesAndHostLifecycle: invalid prestop httpget host",
     "{'spec':{'containers':[{'name':'e','lifecycle':{'preStop':{'httpGet':"
     "{'host':'another.invalid.host'}}}}]}}",
     B, NO, EXACT,
     "probe or lifecycle host (container 'e' uses probe or lifecycle host "
     "'another.invalid.host')"},
    {"hostProbesAndHostLifecycle: multiple containers with multiple invalid hosts",
     "{'spec':{'containers':[{'name':'valid'},"
     "{'name':'invalid1','livenessProbe':{'httpGet':{'host':'a.com'}}},"
     "{'name':'invalid2','lifecycle':{'preStop':{'tcpSocket':{'host':'b.com'}}},"
     "'startupProbe':{'httpGet':{'host':'a.com'}}}]}}",
     B, NO, EXACT,
     "probe or lifecycle host (containers 'invalid1', 'invalid2' use probe or lifecycle hosts "
     "'a.com', 'b.com')"},
    {"hostProbesAndHostLifecycle: invalid ipv4 host in probe",
     "{'spec':{'containers':[{'name':'a','livenessProbe':{'httpGet':{'host':'8.8.8.8'}}}]}}", B, NO,
     EXACT, "probe or lifecycle host (container 'a' uses probe or lifecycle host '8.8.8.8')"},
    {"hostProbesAndHostLifecycle: invalid ipv6 host in probe",
     "{'spec':{'containers':[{'name':'a','livenessProbe':{'tcpSocket':"
     "{'host':'2001:4860:4860::8888'}}}]}}",
     B, NO, EXACT,
     "probe or lifecycle host (container 'a' uses probe or lifecycle host "
     "'2001:4860:4860::8888')"},
    {"hostProbesAndHostLifecycle: invalid host in initcontainer",
     "{'spec':{'initContainers':[{'name':'init','livenessProbe':{'httpGet':"
     "{'host':'invalid.init.host'}}}]}}",
     B, NO, EXACT,
     "probe or lifecycle host (container 'init' uses probe or lifecycle host "
     "'invalid.init.host')"},

    /* ---- check_privileged_test.go */
    {"privileged: privileged",
     "{'spec':{'containers':[{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'privileged':false}},"
     "{'name':'d','securityContext':{'privileged':true}},"
     "{'name':'e','securityContext':{'privileged':true}}]}}",
     B, NO, EXACT, "privileged (containers 'd', 'e' must not set securityContext.privileged=true)"},

    /* ---- check_procMount_baseline_test.go */
    {"procMount_baseline: procMount",
     "{'spec':{'hostUsers':true,'containers':[{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'procMount':'Default'}},"
     "{'name':'d','securityContext':{'procMount':'Unmasked'}},"
     "{'name':'e','securityContext':{'procMount':'other'}}]}}",
     B, NO, EXACT,
     "procMount (containers 'd', 'e' must not set securityContext.procMount to 'Unmasked', "
     "'other')"},
    {"procMount_baseline: procMount with userns",
     "{'spec':{'hostUsers':false,'containers':[{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'procMount':'Default'}},"
     "{'name':'d','securityContext':{'procMount':'Unmasked'}},"
     "{'name':'e','securityContext':{'procMount':'other'}}]}}",
     B, OK, SUB, ""},

    /* ---- check_procMount_restricted_test.go (run with hostUsers true and false) */
    {"procMount_restricted: procMount, hostUsers=true",
     "{'spec':{'hostUsers':true,'containers':[{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'procMount':'Default'}},"
     "{'name':'d','securityContext':{'procMount':'Unmasked'}},"
     "{'name':'e','securityContext':{'procMount':'other'}}]}}",
     R, NO, SUB,
     "procMount (containers 'd', 'e' must not set securityContext.procMount to 'Unmasked', "
     "'other')"},
    {"procMount_restricted: procMount, hostUsers=false",
     "{'spec':{'hostUsers':false,'containers':[{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'procMount':'Default'}},"
     "{'name':'d','securityContext':{'procMount':'Unmasked'}},"
     "{'name':'e','securityContext':{'procMount':'other'}}]}}",
     R, NO, SUB,
     "procMount (containers 'd', 'e' must not set securityContext.procMount to 'Unmasked', "
     "'other')"},

    /* ---- check_restrictedVolumes_test.go */
    {"restrictedVolumes: host path volumes",
     "{'spec':{'volumes':["
     "{'name':'a1','emptyDir':{}},{'name':'a2','secret':{}},"
     "{'name':'a3','persistentVolumeClaim':{}},{'name':'a4','downwardAPI':{}},"
     "{'name':'a5','configMap':{}},{'name':'a6','projected':{}},{'name':'a7','csi':{}},"
     "{'name':'a8','ephemeral':{}},{'name':'a9','image':{}},"
     "{'name':'b1','hostPath':{}},{'name':'b2','gcePersistentDisk':{}},"
     "{'name':'b3','awsElasticBlockStore':{}},{'name':'b4','gitRepo':{}},"
     "{'name':'b5','nfs':{}},{'name':'b6','iscsi':{}},{'name':'b7','glusterfs':{}},"
     "{'name':'b8','rbd':{}},{'name':'b9','flexVolume':{}},{'name':'b10','cinder':{}},"
     "{'name':'b11','cephfs':{}},{'name':'b12','flocker':{}},{'name':'b13','fc':{}},"
     "{'name':'b14','azureFile':{}},{'name':'b15','vsphereVolume':{}},"
     "{'name':'b16','quobyte':{}},{'name':'b17','azureDisk':{}},"
     "{'name':'b18','photonPersistentDisk':{}},{'name':'b19','portworxVolume':{}},"
     "{'name':'b20','scaleIO':{}},{'name':'b21','storageos':{}},"
     "{'name':'c1'}]}}",
     R, NO, EXACT,
     "restricted volume types (volumes "
     "'b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7', 'b8', 'b9', 'b10', 'b11', 'b12', 'b13', 'b14', "
     "'b15', 'b16', 'b17', 'b18', 'b19', 'b20', 'b21', 'c1'"
     " use restricted volume types "
     "'awsElasticBlockStore', 'azureDisk', 'azureFile', 'cephfs', 'cinder', 'fc', 'flexVolume', "
     "'flocker', 'gcePersistentDisk', 'gitRepo', 'glusterfs', 'hostPath', 'iscsi', 'nfs', "
     "'photonPersistentDisk', 'portworxVolume', 'quobyte', 'rbd', 'scaleIO', 'storageos', "
     "'unknown', 'vsphereVolume')"},

    /* ---- check_runAsNonRoot_test.go */
    {"runAsNonRoot: no explicit runAsNonRoot", "{'spec':{'containers':[{'name':'a'}]}}", R, NO, SUB,
     "runAsNonRoot != true (pod or container 'a' must set securityContext.runAsNonRoot=true)"},
    {"runAsNonRoot: pod runAsNonRoot=false",
     "{'spec':{'securityContext':{'runAsNonRoot':false},'containers':[{'name':'a'}]}}", R, NO, SUB,
     "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)"},
    {"runAsNonRoot: containers runAsNonRoot=false",
     "{'spec':{'securityContext':{'runAsNonRoot':true},'containers':["
     "{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'runAsNonRoot':false}},"
     "{'name':'d','securityContext':{'runAsNonRoot':false}},"
     "{'name':'e','securityContext':{'runAsNonRoot':true}},"
     "{'name':'f','securityContext':{'runAsNonRoot':true}}]}}",
     R, NO, SUB,
     "runAsNonRoot != true (containers 'c', 'd' must not set securityContext.runAsNonRoot=false)"},
    {"runAsNonRoot: pod nil, container fallthrough",
     "{'spec':{'containers':[{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'d','securityContext':{'runAsNonRoot':true}},"
     "{'name':'e','securityContext':{'runAsNonRoot':true}}]}}",
     R, NO, SUB,
     "runAsNonRoot != true (pod or containers 'a', 'b' must set "
     "securityContext.runAsNonRoot=true)"},
    {"runAsNonRoot: host users false allowed", "{'spec':{'hostUsers':false}}", R, OK, SUB, ""},

    /* ---- check_runAsUser_test.go */
    {"runAsUser: pod runAsUser=0",
     "{'spec':{'securityContext':{'runAsUser':0},'containers':[{'name':'a'}]}}", R, NO, SUB,
     "runAsUser=0 (pod must not set runAsUser=0)"},
    {"runAsUser: pod runAsUser=non-zero",
     "{'spec':{'securityContext':{'runAsUser':1000,'runAsNonRoot':true,'seccompProfile':"
     "{'type':'RuntimeDefault'}},'containers':[{'name':'a'," GOOD_SC "}]}}",
     R, OK, SUB, ""},
    {"runAsUser: pod runAsUser=nil",
     "{'spec':{'securityContext':{'runAsUser':null,'runAsNonRoot':true,'seccompProfile':"
     "{'type':'RuntimeDefault'}},'containers':[{'name':'a'," GOOD_SC "}]}}",
     R, OK, SUB, ""},
    {"runAsUser: containers runAsUser=0",
     "{'spec':{'securityContext':{'runAsUser':1000},'containers':["
     "{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'runAsUser':0}},"
     "{'name':'d','securityContext':{'runAsUser':0}},"
     "{'name':'e','securityContext':{'runAsUser':1}},"
     "{'name':'f','securityContext':{'runAsUser':1}}]}}",
     R, NO, SUB, "runAsUser=0 (containers 'c', 'd' must not set runAsUser=0)"},
    {"runAsUser: containers runAsUser=non-zero",
     "{'spec':{" QUIET_POD ",'containers':["
     "{'name':'c','securityContext':{'runAsUser':1,'allowPrivilegeEscalation':false,"
     "'capabilities':{'drop':['ALL']}}},"
     "{'name':'d','securityContext':{'runAsUser':2,'allowPrivilegeEscalation':false,"
     "'capabilities':{'drop':['ALL']}}}]}}",
     R, OK, SUB, ""},
    {"runAsUser: host users false allowed",
     "{'spec':{'hostUsers':false,'securityContext':{'runAsUser':0}}}", R, OK, SUB, ""},

    /* ---- check_seLinuxOptions_test.go (1.31) */
    {"seLinuxOptions: invalid pod and containers",
     "{'spec':{'securityContext':{'seLinuxOptions':{'type':'foo','user':'bar','role':'baz'}},"
     "'containers':["
     "{'name':'a','securityContext':{'seLinuxOptions':{'type':'container_t'}}},"
     "{'name':'b','securityContext':{'seLinuxOptions':{'type':'container_init_t'}}},"
     "{'name':'c','securityContext':{'seLinuxOptions':{'type':'container_kvm_t'}}},"
     "{'name':'d','securityContext':{'seLinuxOptions':{'type':'container_engine_t'}}},"
     "{'name':'e','securityContext':{'seLinuxOptions':{'type':'bar'}}},"
     "{'name':'f','securityContext':{'seLinuxOptions':{'user':'bar'}}},"
     "{'name':'g','securityContext':{'seLinuxOptions':{'role':'baz'}}}]}}",
     B, NO, EXACT,
     "seLinuxOptions (pod and containers 'e', 'f', 'g' set forbidden "
     "securityContext.seLinuxOptions: types 'bar', 'foo'; user may not be set; role may not be "
     "set)"},
    {"seLinuxOptions: invalid pod",
     "{'spec':{'securityContext':{'seLinuxOptions':{'type':'foo','user':'bar','role':'baz'}},"
     "'containers':["
     "{'name':'a','securityContext':{'seLinuxOptions':{'type':'container_t'}}},"
     "{'name':'b','securityContext':{'seLinuxOptions':{'type':'container_init_t'}}},"
     "{'name':'c','securityContext':{'seLinuxOptions':{'type':'container_kvm_t'}}},"
     "{'name':'d','securityContext':{'seLinuxOptions':{'type':'container_engine_t'}}}]}}",
     B, NO, EXACT,
     "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type 'foo'; user may not "
     "be set; role may not be set)"},
    {"seLinuxOptions: invalid containers",
     "{'spec':{'securityContext':{'seLinuxOptions':{}},'containers':["
     "{'name':'a','securityContext':{'seLinuxOptions':{'type':'container_t'}}},"
     "{'name':'b','securityContext':{'seLinuxOptions':{'type':'container_init_t'}}},"
     "{'name':'c','securityContext':{'seLinuxOptions':{'type':'container_kvm_t'}}},"
     "{'name':'d','securityContext':{'seLinuxOptions':{'type':'container_engine_t'}}},"
     "{'name':'e','securityContext':{'seLinuxOptions':{'type':'bar'}}},"
     "{'name':'f','securityContext':{'seLinuxOptions':{'user':'bar'}}},"
     "{'name':'g','securityContext':{'seLinuxOptions':{'role':'baz'}}}]}}",
     B, NO, EXACT,
     "seLinuxOptions (containers 'e', 'f', 'g' set forbidden securityContext.seLinuxOptions: "
     "type 'bar'; user may not be set; role may not be set)"},
    {"seLinuxOptions: bad type", "{'spec':{'securityContext':{'seLinuxOptions':{'type':'bad'}}}}",
     B, NO, EXACT, "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type 'bad')"},
    {"seLinuxOptions: bad user", "{'spec':{'securityContext':{'seLinuxOptions':{'user':'bad'}}}}",
     B, NO, EXACT,
     "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: user may not be set)"},
    {"seLinuxOptions: bad role", "{'spec':{'securityContext':{'seLinuxOptions':{'role':'bad'}}}}",
     B, NO, EXACT,
     "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: role may not be set)"},

    /* ---- check_seccompProfile_baseline_test.go: the annotation cases are
     * policy 1.0-1.18 only, so "latest" admits them */
    {"seccompProfile_baseline: pod and containers seccomp annotations invalid (1.0 only)",
     "{'metadata':{'annotations':{'seccomp.security.alpha.kubernetes.io/pod':'unconfined',"
     "'container.seccomp.security.alpha.kubernetes.io/a':'unconfined'}},"
     "'spec':{'containers':[{'name':'a'}]}}",
     B, OK, SUB, ""},
    {"seccompProfile_baseline: pod seccomp invalid",
     "{'spec':{'securityContext':{'seccompProfile':{'type':'Unconfined'}},"
     "'containers':[{'name':'a'}]}}",
     B, NO, EXACT,
     "seccompProfile (pod must not set securityContext.seccompProfile.type to 'Unconfined')"},
    {"seccompProfile_baseline: containers seccomp invalid",
     "{'spec':{'securityContext':{'seccompProfile':{'type':'RuntimeDefault'}},'containers':["
     "{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'seccompProfile':{'type':'Unconfined'}}},"
     "{'name':'d','securityContext':{'seccompProfile':{'type':'Unconfined'}}},"
     "{'name':'e','securityContext':{'seccompProfile':{'type':'RuntimeDefault'}}},"
     "{'name':'f','securityContext':{'seccompProfile':{'type':'RuntimeDefault'}}}]}}",
     B, NO, EXACT,
     "seccompProfile (containers 'c', 'd' must not set securityContext.seccompProfile.type to "
     "'Unconfined')"},
    {"seccompProfile_baseline: pod and containers seccomp invalid",
     "{'spec':{'securityContext':{'seccompProfile':{'type':'Unconfined'}},'containers':["
     "{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'seccompProfile':{'type':'Unconfined'}}},"
     "{'name':'d','securityContext':{'seccompProfile':{'type':'Unconfined'}}},"
     "{'name':'e','securityContext':{'seccompProfile':{'type':'RuntimeDefault'}}},"
     "{'name':'f','securityContext':{'seccompProfile':{'type':'RuntimeDefault'}}}]}}",
     B, NO, EXACT,
     "seccompProfile (pod and containers 'c', 'd' must not set securityContext.seccompProfile.type "
     "to 'Unconfined')"},

    /* ---- check_seccompProfile_restricted_test.go */
    {"seccompProfile_restricted: no explicit seccomp", "{'spec':{'containers':[{'name':'a'}]}}", R,
     NO, SUB,
     "seccompProfile (pod or container 'a' must set securityContext.seccompProfile.type to "
     "'RuntimeDefault' or 'Localhost')"},
    {"seccompProfile_restricted: no explicit seccomp, windows Pod",
     "{'spec':{'os':{'name':'windows'},'securityContext':{'runAsNonRoot':true},"
     "'containers':[{'name':'a'}]}}",
     R, OK, SUB, ""},
    {"seccompProfile_restricted: no explicit seccomp, linux pod",
     "{'spec':{'os':{'name':'linux'},'containers':[{'name':'a'}]}}", R, NO, SUB,
     "seccompProfile (pod or container 'a' must set securityContext.seccompProfile.type to "
     "'RuntimeDefault' or 'Localhost')"},
    {"seccompProfile_restricted: pod seccomp invalid",
     "{'spec':{'securityContext':{'seccompProfile':{'type':'Unconfined'}},"
     "'containers':[{'name':'a'}]}}",
     R, NO, SUB,
     "seccompProfile (pod must not set securityContext.seccompProfile.type to 'Unconfined')"},
    {"seccompProfile_restricted: containers seccomp invalid",
     "{'spec':{'securityContext':{'seccompProfile':{'type':'RuntimeDefault'}},'containers':["
     "{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'seccompProfile':{'type':'Unconfined'}}},"
     "{'name':'d','securityContext':{'seccompProfile':{'type':'Unconfined'}}},"
     "{'name':'e','securityContext':{'seccompProfile':{'type':'RuntimeDefault'}}},"
     "{'name':'f','securityContext':{'seccompProfile':{'type':'RuntimeDefault'}}}]}}",
     R, NO, SUB,
     "seccompProfile (containers 'c', 'd' must not set securityContext.seccompProfile.type to "
     "'Unconfined')"},
    {"seccompProfile_restricted: pod nil, container fallthrough",
     "{'spec':{'containers':[{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'d','securityContext':{'seccompProfile':{'type':'RuntimeDefault'}}},"
     "{'name':'e','securityContext':{'seccompProfile':{'type':'RuntimeDefault'}}}]}}",
     R, NO, SUB,
     "seccompProfile (pod or containers 'a', 'b' must set securityContext.seccompProfile.type to "
     "'RuntimeDefault' or 'Localhost')"},

    /* ---- check_sysctls_test.go (the latest allowed set, 1.37) */
    {"sysctls: forbidden sysctls",
     "{'spec':{'securityContext':{'sysctls':[{'name':'a'},{'name':'b'}]}}}", B, NO, EXACT,
     "forbidden sysctls (a, b)"},
    {"sysctls: new supported sysctls: net.ipv4.ip_local_reserved_ports (1.27)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.ip_local_reserved_ports',"
     "'value':'1024-4999'}]}}}",
     B, OK, SUB, ""},
    {"sysctls: new supported sysctls: net.ipv4.tcp_keepalive_time (1.29)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_keepalive_time',"
     "'value':'7200'}]}}}",
     B, OK, SUB, ""},
    {"sysctls: new supported sysctls: net.ipv4.tcp_fin_timeout (1.29)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_fin_timeout','value':'60'}]}}}",
     B, OK, SUB, ""},
    {"sysctls: new supported sysctls: net.ipv4.tcp_keepalive_intvl (1.29)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_keepalive_intvl',"
     "'value':'75'}]}}}",
     B, OK, SUB, ""},
    {"sysctls: new supported sysctls: net.ipv4.tcp_keepalive_probes (1.29)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_keepalive_probes',"
     "'value':'9'}]}}}",
     B, OK, SUB, ""},
    {"sysctls: new supported sysctls: net.ipv4.tcp_rmem (1.32)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_rmem',"
     "'value':'4096 87380 16777216'}]}}}",
     B, OK, SUB, ""},
    {"sysctls: new supported sysctls: net.ipv4.tcp_wmem (1.32)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_wmem',"
     "'value':'4096 87380 16777216'}]}}}",
     B, OK, SUB, ""},
    {"sysctls: new supported sysctls: net.ipv4.tcp_slow_start_after_idle (1.37)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_slow_start_after_idle',"
     "'value':'0'}]}}}",
     B, OK, SUB, ""},
    {"sysctls: new supported sysctls: net.ipv4.tcp_notsent_lowat (1.37)",
     "{'spec':{'securityContext':{'sysctls':[{'name':'net.ipv4.tcp_notsent_lowat',"
     "'value':'16384'}]}}}",
     B, OK, SUB, ""},

    /* ---- check_windowsHostProcess_test.go */
    {"windowsHostProcess: host process",
     "{'spec':{'securityContext':{'windowsOptions':{'hostProcess':true}},'containers':["
     "{'name':'a'},{'name':'b','securityContext':{}},"
     "{'name':'c','securityContext':{'windowsOptions':{}}},"
     "{'name':'d','securityContext':{'windowsOptions':{'hostProcess':false}}},"
     "{'name':'e','securityContext':{'windowsOptions':{'hostProcess':true}}},"
     "{'name':'f','securityContext':{'windowsOptions':{'hostProcess':true}}}]}}",
     B, NO, EXACT,
     "hostProcess (pod and containers 'e', 'f' must not set "
     "securityContext.windowsOptions.hostProcess=true)"},

    /* ---- whole pods: levels, order, inheritance, edge cases */
    {"compliant restricted pod passes restricted",
     "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'ok'},'spec':{" QUIET_POD ","
     "'volumes':[{'name':'cfg','configMap':{'name':'cfg'}},{'name':'tmp','emptyDir':{}}],"
     "'initContainers':[{'name':'init','image':'busybox'," GOOD_SC "}],"
     "'containers':[{'name':'app','image':'nginx','ports':[{'containerPort':8080}],"
     "'securityContext':{'allowPrivilegeEscalation':false,'runAsUser':1000,"
     "'capabilities':{'drop':['ALL'],'add':['NET_BIND_SERVICE']}}}]}}",
     R, OK, SUB, ""},
    {"compliant restricted pod passes baseline",
     "{'metadata':{'name':'ok'},'spec':{" QUIET_POD ",'containers':[{'name':'app'," GOOD_SC "}]}}",
     B, OK, SUB, ""},
    {"container-level runAsNonRoot and seccomp stand in for pod-level ones",
     "{'spec':{'containers':[{'name':'app','securityContext':{'allowPrivilegeEscalation':false,"
     "'capabilities':{'drop':['ALL']},'runAsNonRoot':true,'seccompProfile':{'type':'Localhost',"
     "'localhostProfile':'p.json'}}}]}}",
     R, OK, SUB, ""},
    {"pod-level runAsNonRoot=false is not undone by a container's true",
     "{'spec':{"
     "'securityContext':{'runAsNonRoot':false,'seccompProfile':{'type':'RuntimeDefault'}},"
     "'containers':[{'name':'app','securityContext':{'allowPrivilegeEscalation':false,"
     "'capabilities':{'drop':['ALL']},'runAsNonRoot':true}}]}}",
     R, NO, EXACT, "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)"},
    {"empty restricted pod has nothing to deny", "{'spec':{'containers':[]}}", R, OK, SUB, ""},
    {"null fields read as absent",
     "{'metadata':null,'spec':{'hostNetwork':null,'securityContext':null,"
     "'containers':[{'name':'a','securityContext':{'privileged':null,'capabilities':null}}]}}",
     B, OK, SUB, ""},
    {"default nginx pod fails restricted (docs example)",
     "{'metadata':{'name':'nginx'},'spec':{'containers':[{'name':'nginx','image':'nginx'}]}}", R,
     NO, EXACT,
     "allowPrivilegeEscalation != false (container 'nginx' must set "
     "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "
     "'nginx' must set securityContext.capabilities.drop=['ALL']), runAsNonRoot != true (pod or "
     "container 'nginx' must set securityContext.runAsNonRoot=true), seccompProfile (pod or "
     "container 'nginx' must set securityContext.seccompProfile.type to 'RuntimeDefault' or "
     "'Localhost')"},
    {"hostNetwork and privileged (brief example)",
     "{'spec':{'hostNetwork':true,'containers':[{'name':'x','securityContext':"
     "{'privileged':true}}]}}",
     B, NO, EXACT,
     "host namespaces (hostNetwork=true), privileged (container 'x' must not set "
     "securityContext.privileged=true)"},
    {"several violations at baseline",
     "{'spec':{'hostPID':true,'volumes':[{'name':'host','hostPath':{'path':'/'}}],"
     "'containers':[{'name':'app','securityContext':{'privileged':true,'runAsUser':0,"
     "'capabilities':{'add':['SYS_ADMIN']}},'ports':[{'containerPort':80,'hostPort':80}]}]}}",
     B, NO, EXACT,
     "non-default capabilities (container 'app' must not include 'SYS_ADMIN' in "
     "securityContext.capabilities.add), host namespaces (hostPID=true), hostPath volumes "
     "(volume 'host'), hostPort (container 'app' uses hostPort 80), privileged (container 'app' "
     "must not set securityContext.privileged=true)"},
    {"several violations at restricted",
     "{'spec':{'hostPID':true,'volumes':[{'name':'host','hostPath':{'path':'/'}}],"
     "'containers':[{'name':'app','securityContext':{'privileged':true,'runAsUser':0,"
     "'capabilities':{'add':['SYS_ADMIN']}},'ports':[{'containerPort':80,'hostPort':80}]}]}}",
     R, NO, EXACT,
     "host namespaces (hostPID=true), hostPort (container 'app' uses hostPort 80), privileged "
     "(container 'app' must not set securityContext.privileged=true), allowPrivilegeEscalation != "
     "false (container 'app' must set securityContext.allowPrivilegeEscalation=false), "
     "unrestricted capabilities (container 'app' must set securityContext.capabilities.drop=["
     "'ALL']; container 'app' must not include 'SYS_ADMIN' in securityContext.capabilities.add), "
     "restricted volume types (volume 'host' uses restricted volume type 'hostPath'), "
     "runAsNonRoot != true (pod or container 'app' must set securityContext.runAsNonRoot=true), "
     "runAsUser=0 (container 'app' must not set runAsUser=0), seccompProfile (pod or container "
     "'app' must set securityContext.seccompProfile.type to 'RuntimeDefault' or 'Localhost')"},
    {"privileged level admits anything",
     "{'spec':{'hostPID':true,'containers':[{'name':'app','securityContext':"
     "{'privileged':true}}]}}",
     P, OK, SUB, ""},
    {"ephemeral containers are checked",
     "{'spec':{'containers':[{'name':'app'}],'ephemeralContainers':[{'name':'debug',"
     "'securityContext':{'privileged':true}}]}}",
     B, NO, EXACT, "privileged (container 'debug' must not set securityContext.privileged=true)"},
    {"containers visited init, regular, ephemeral",
     "{'spec':{'ephemeralContainers':[{'name':'e','securityContext':{'privileged':true}}],"
     "'containers':[{'name':'c','securityContext':{'privileged':true}}],"
     "'initContainers':[{'name':'i','securityContext':{'privileged':true}}]}}",
     B, NO, EXACT,
     "privileged (containers 'i', 'c', 'e' must not set securityContext.privileged=true)"},
    {"host ports sort as strings",
     "{'spec':{'containers':[{'name':'a','ports':[{'hostPort':9},{'hostPort':10},"
     "{'hostPort':9}]}]}}",
     B, NO, EXACT, "hostPort (container 'a' uses hostPorts 10, 9)"},
    {"sysctl with an empty name has no detail",
     "{'spec':{'securityContext':{'sysctls':[{'name':''}]}}}", B, NO, EXACT, "forbidden sysctls"},
    {"appArmorProfile without a type is forbidden",
     "{'spec':{'containers':[{'name':'a','securityContext':{'appArmorProfile':{}}}]}}", B, NO,
     EXACT, "forbidden AppArmor profile (container 'a' must not set AppArmor profile type to '')"},
    {"appArmor annotation and field together",
     "{'metadata':{'annotations':{'container.apparmor.security.beta.kubernetes.io/a':"
     "'unconfined'}},'spec':{'securityContext':{'appArmorProfile':{'type':'Unconfined'}},"
     "'containers':[{'name':'a','securityContext':{'appArmorProfile':{'type':'Bogus'}}}]}}",
     B, NO, EXACT,
     "forbidden AppArmor profiles (pod and container 'a' and annotation must not set AppArmor "
     "profile type to 'Bogus', 'Unconfined', "
     "'container.apparmor.security.beta.kubernetes.io/a='unconfined'')"},
    {"appArmor annotation value is quoted as Go's %q",
     "{'metadata':{'annotations':{'container.apparmor.security.beta.kubernetes.io/a':"
     "'x\\'y\\n\\u00e9\\u00a0'}}}",
     B, NO, EXACT,
     "forbidden AppArmor profile (annotation must not set AppArmor profile type to "
     "'container.apparmor.security.beta.kubernetes.io/a='x\\'y\\n\xc3\xa9\\u00a0'')"},
    {"restricted volume without a name and source is unknown", "{'spec':{'volumes':[null]}}", R, NO,
     EXACT, "restricted volume types (volume '' uses restricted volume type 'unknown')"},
    {"procMount Default is allowed",
     "{'spec':{'containers':[{'name':'a','securityContext':{'procMount':'Default'}}]}}", B, OK, SUB,
     ""},
    {"capability drop 'all' in lower case does not count",
     "{'spec':{" QUIET_POD ",'containers':[{'name':'a','securityContext':{"
     "'allowPrivilegeEscalation':false,'capabilities':{'drop':['all']}}}]}}",
     R, NO, EXACT,
     "unrestricted capabilities (container 'a' must set "
     "securityContext.capabilities.drop=['ALL'])"},

    /* ---- input that is not a v1 Pod */
    {"pod that is not an object", "[]", B, BAD, SUB, "pod is not a JSON object"},
    {"pod that is not an object, privileged", "'pod'", P, BAD, SUB, "not a JSON object"},
    {"wrong type names the field",
     "{'spec':{'containers':[{'name':'a'},{'name':'b','securityContext':{'privileged':'yes'}}]}}",
     B, BAD, SUB, "spec.containers[1].securityContext.privileged: expected a boolean"},
    {"host port beyond int32", "{'spec':{'containers':[{'ports':[{'hostPort':4294967296}]}]}}", B,
     BAD, SUB, "spec.containers[0].ports[0].hostPort: expected a 32-bit integer"},
    {"annotation value that is not a string", "{'metadata':{'annotations':{'a':1}}}", R, BAD, SUB,
     "metadata.annotations[a]: expected a string"},
    {"runAsUser that is a float", "{'spec':{'securityContext':{'runAsUser':0.0}}}", R, BAD, SUB,
     "spec.securityContext.runAsUser: expected an integer"},
};

/* Turns the table's ' into ". */
static char *unquote(const char *s)
{
    char *d = strdup(s), *p;
    assert_non_null(d);
    for (p = d; *p; p++)
        if (*p == '\'')
            *p = '"';
    return d;
}

static void test_row(void **state)
{
    const row *r = *state;
    char *text = unquote(r->pod), *want = unquote(r->want), expect[TD_ERR_MAX];
    json_error_t jerr;
    json_t *pod = json_loads(text, JSON_DECODE_ANY, &jerr);
    td_err err = {{0}};
    td_status st;

    if (!pod)
        fail_msg("%s: bad JSON in table: %s", r->name, jerr.text);
    st = td_pss_check(pod, r->level, &err);
    if (st != r->status)
        fail_msg("%s: status %d, want %d (%s)", r->name, st, r->status, err.msg);
    if (st != TD_OK && r->match == EXACT) {
        snprintf(expect, sizeof expect, "violates PodSecurity \"%s:latest\": %s",
                 r->level == TD_PSS_BASELINE ? "baseline" : "restricted", want);
        if (strcmp(err.msg, expect) != 0)
            fail_msg("%s:\n got: %s\nwant: %s", r->name, err.msg, expect);
    } else if (st != TD_OK && !strstr(err.msg, want)) {
        fail_msg("%s:\n got: %s\nwant substring: %s", r->name, err.msg, want);
    }
    /* a NULL err is allowed and changes nothing about the verdict */
    assert_int_equal(td_pss_check(pod, r->level, NULL), st);
    json_decref(pod);
    free(text);
    free(want);
}

static const struct {
    const char *text;
    td_status status;
    td_pss_level level;
} level_rows[] = {
    {"privileged", TD_OK, TD_PSS_PRIVILEGED}, {"baseline", TD_OK, TD_PSS_BASELINE},
    {"restricted", TD_OK, TD_PSS_RESTRICTED}, {"Baseline", TD_EINVAL, TD_PSS_PRIVILEGED},
    {"", TD_EINVAL, TD_PSS_PRIVILEGED},       {"restricted ", TD_EINVAL, TD_PSS_PRIVILEGED},
    {NULL, TD_EINVAL, TD_PSS_PRIVILEGED},
};

static void test_level_parse(void **state)
{
    size_t i;
    (void)state;
    for (i = 0; i < sizeof level_rows / sizeof level_rows[0]; i++) {
        td_pss_level got = TD_PSS_PRIVILEGED;
        td_status st = td_pss_level_parse(level_rows[i].text, &got);
        if (st != level_rows[i].status || got != level_rows[i].level)
            fail_msg("level %s: status %d level %d",
                     level_rows[i].text ? level_rows[i].text : "NULL", st, got);
    }
}

/* A pod with more failing containers than the message has room for is cut
 * at TD_ERR_MAX - 1 bytes and still denied. */
static void test_long_message(void **state)
{
    json_t *pod = json_object(), *spec = json_object(), *ctrs = json_array();
    td_err err;
    int i;
    (void)state;
    for (i = 0; i < 500; i++) {
        char name[32];
        snprintf(name, sizeof name, "container-%d", i);
        json_array_append_new(
            ctrs, json_pack("{s:s, s:{s:b}}", "name", name, "securityContext", "privileged", 1));
    }
    json_object_set_new(spec, "containers", ctrs);
    json_object_set_new(pod, "spec", spec);
    assert_int_equal(td_pss_check(pod, TD_PSS_RESTRICTED, &err), TD_EFORBIDDEN);
    assert_int_equal(strlen(err.msg), TD_ERR_MAX - 1);
    assert_non_null(strstr(err.msg, "privileged (containers \"container-0\", \"container-1\""));
    json_decref(pod);
}


/* ---- the allowed-path walk against the full checks */

/* Status and message of td_pss_check and td__pss_check_full on pod, at the
 * two levels that walk; fails naming what differs. */
static void expect_same(const json_t *pod, const char *what)
{
    static const td_pss_level levels[] = {TD_PSS_BASELINE, TD_PSS_RESTRICTED};
    size_t i;
    for (i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        td_err fast = {{0}}, full = {{0}};
        td_status a = td_pss_check(pod, levels[i], &fast);
        td_status b = td__pss_check_full(pod, levels[i], &full);
        if (a != b || (a != TD_OK && strcmp(fast.msg, full.msg) != 0)) {
            char *text = json_dumps(pod, JSON_COMPACT);
            fail_msg("%s at level %d: fast %d (%s), full %d (%s)\npod: %s", what, (int)levels[i],
                     a, a == TD_OK ? "" : fast.msg, b, b == TD_OK ? "" : full.msg, text);
        }
    }
}

/* Every table row, at both levels. */
static void test_fast_rows(void **state)
{
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *text = unquote(rows[i].pod);
        json_t *pod = json_loads(text, JSON_DECODE_ANY, NULL);
        assert_non_null(pod);
        expect_same(pod, rows[i].name);
        json_decref(pod);
        free(text);
    }
}

/* Sets path (members separated by spaces; a number indexes an array) in
 * doc to v (taken over), making objects on the way where one is missing. */
static void set_path(json_t *doc, const char *path, json_t *v)
{
    json_t *cur = doc;
    for (;;) {
        const char *sp = strchr(path, ' ');
        size_t n = sp ? (size_t)(sp - path) : strlen(path);
        char seg[128];
        json_t *next;
        snprintf(seg, sizeof seg, "%.*s", (int)n, path);
        if (json_is_array(cur)) {
            size_t idx = strtoul(seg, NULL, 10);
            if (!sp) {
                json_array_set_new(cur, idx, v);
                return;
            }
            next = json_array_get(cur, idx);
        } else {
            if (!sp) {
                json_object_set_new(cur, seg, v);
                return;
            }
            next = json_object_get(cur, seg);
            if (!json_is_object(next) && !json_is_array(next)) {
                next = json_object();
                json_object_set_new(cur, seg, next);
            }
        }
        if (!next)
            break;
        cur = next;
        path = sp + 1;
    }
    json_decref(v);
}

/* A restricted-compliant pod with every kind of member the checks read,
 * and one member at a time set to each of a list of values: the walk and
 * the full checks agree on every one. */
static void test_fast_mutations(void **state)
{
    static const char base[] =
        "{'metadata':{'name':'p','annotations':{'a':'b',"
        "'container.apparmor.security.beta.kubernetes.io/c':'runtime/default'}},"
        "'spec':{'hostNetwork':false,'hostUsers':true,'os':{'name':'linux'},"
        "'securityContext':{'runAsNonRoot':true,'runAsUser':1000,"
        "'seccompProfile':{'type':'RuntimeDefault'},'appArmorProfile':{'type':'RuntimeDefault'},"
        "'seLinuxOptions':{'type':'container_t'},'windowsOptions':{'hostProcess':false},"
        "'sysctls':[{'name':'kernel.shm_rmid_forced','value':'1'}]},"
        "'volumes':[{'name':'v','emptyDir':{}},{'name':'w','configMap':{'name':'c'}}],"
        "'initContainers':[{'name':'i','image':'x'," GOOD_SC "}],"
        "'containers':[{'name':'a','image':'x','ports':[{'containerPort':80,'hostPort':0}],"
        "'livenessProbe':{'httpGet':{'path':'/','port':80}},"
        "'readinessProbe':{'tcpSocket':{'port':80}},'startupProbe':{'exec':{}},"
        "'lifecycle':{'postStart':{'httpGet':{'port':1}},'preStop':{'exec':{}}},"
        "'securityContext':{'allowPrivilegeEscalation':false,'privileged':false,"
        "'runAsNonRoot':true,'runAsUser':5,'procMount':'Default',"
        "'capabilities':{'drop':['ALL'],'add':['NET_BIND_SERVICE']},"
        "'seccompProfile':{'type':'Localhost'},'appArmorProfile':{'type':'Localhost'},"
        "'seLinuxOptions':{'type':'container_init_t'},'windowsOptions':{}}}],"
        "'ephemeralContainers':[{'name':'e'," GOOD_SC "}]}}";
    static const char *const paths[] = {
        "metadata",
        "metadata annotations",
        "metadata annotations container.apparmor.security.beta.kubernetes.io/c",
        "metadata annotations a",
        "spec",
        "spec hostNetwork",
        "spec hostPID",
        "spec hostIPC",
        "spec hostUsers",
        "spec os",
        "spec os name",
        "spec securityContext",
        "spec securityContext runAsNonRoot",
        "spec securityContext runAsUser",
        "spec securityContext seccompProfile",
        "spec securityContext seccompProfile type",
        "spec securityContext appArmorProfile",
        "spec securityContext appArmorProfile type",
        "spec securityContext seLinuxOptions",
        "spec securityContext seLinuxOptions type",
        "spec securityContext seLinuxOptions user",
        "spec securityContext seLinuxOptions role",
        "spec securityContext windowsOptions",
        "spec securityContext windowsOptions hostProcess",
        "spec securityContext sysctls",
        "spec securityContext sysctls 0",
        "spec securityContext sysctls 0 name",
        "spec securityContext privileged",
        "spec securityContext capabilities",
        "spec volumes",
        "spec volumes 0",
        "spec volumes 0 name",
        "spec volumes 0 emptyDir",
        "spec volumes 1 hostPath",
        "spec volumes 1 configMap",
        "spec volumes 1 nfs",
        "spec initContainers",
        "spec initContainers 0",
        "spec initContainers 0 securityContext",
        "spec containers",
        "spec containers 0",
        "spec containers 0 name",
        "spec containers 0 ports",
        "spec containers 0 ports 0",
        "spec containers 0 ports 0 hostPort",
        "spec containers 0 livenessProbe",
        "spec containers 0 livenessProbe httpGet",
        "spec containers 0 livenessProbe httpGet host",
        "spec containers 0 readinessProbe tcpSocket",
        "spec containers 0 readinessProbe tcpSocket host",
        "spec containers 0 startupProbe",
        "spec containers 0 lifecycle",
        "spec containers 0 lifecycle postStart",
        "spec containers 0 lifecycle postStart httpGet host",
        "spec containers 0 lifecycle preStop",
        "spec containers 0 securityContext",
        "spec containers 0 securityContext allowPrivilegeEscalation",
        "spec containers 0 securityContext privileged",
        "spec containers 0 securityContext runAsNonRoot",
        "spec containers 0 securityContext runAsUser",
        "spec containers 0 securityContext procMount",
        "spec containers 0 securityContext capabilities",
        "spec containers 0 securityContext capabilities drop",
        "spec containers 0 securityContext capabilities add",
        "spec containers 0 securityContext seccompProfile",
        "spec containers 0 securityContext seccompProfile type",
        "spec containers 0 securityContext appArmorProfile type",
        "spec containers 0 securityContext seLinuxOptions",
        "spec containers 0 securityContext seLinuxOptions type",
        "spec containers 0 securityContext seLinuxOptions role",
        "spec containers 0 securityContext windowsOptions",
        "spec containers 0 securityContext windowsOptions hostProcess",
        "spec containers 0 securityContext sysctls",
        "spec ephemeralContainers",
        "spec ephemeralContainers 0",
    };
    static const char *const values[] = {
        "null", "true", "false", "0", "1", "-1", "70000", "5000000000", "1.5", "''", "'x'",
        "'ALL'", "'Default'", "'Unmasked'", "'RuntimeDefault'", "'Localhost'", "'Unconfined'",
        "'windows'", "'NET_BIND_SERVICE'", "'SYS_ADMIN'", "'CHOWN'", "'container_t'",
        "'runtime/default'", "'localhost/x'", "'unconfined'", "[]", "[null]", "[1]", "['ALL']",
        "['NET_BIND_SERVICE']", "['CHOWN']", "['SYS_ADMIN','ALL']", "{}",
        "{'type':'RuntimeDefault'}", "{'type':'Unconfined'}", "{'type':1}", "{'host':'h'}",
        "{'host':''}", "{'httpGet':{'host':'h'}}", "{'tcpSocket':{'host':'h'}}",
        "{'tcpSocket':1}", "[{}]", "[{'name':'kernel.shm_rmid_forced'}]", "[{'name':'x'}]",
        "[{'name':1}]", "[{'hostPort':1}]", "[{'hostPort':'1'}]", "[{'name':'v','hostPath':{}}]",
        "[{'name':'v','secret':{}}]", "[{'name':'v','nfs':{}}]", "[{'name':'v','secret':1}]",
        "[{'name':'v','csi':null,'nfs':{}}]", "{'drop':['ALL']}", "{'add':['CHOWN']}",
        "{'name':'z'}", "{'name':'z','securityContext':{'privileged':true}}",
        "{'user':'u'}", "{'hostProcess':true}", "{'hostProcess':'x'}", "{'postStart':1}",
    };
    size_t p, v;
    char *text = unquote(base);
    json_t *pod = json_loads(text, 0, NULL);
    td_err err;
    (void)state;
    assert_non_null(pod);
    /* the base passes both levels (the walk's own verdict) */
    assert_int_equal(td_pss_check(pod, TD_PSS_RESTRICTED, &err), TD_OK);
    assert_int_equal(td_pss_check(pod, TD_PSS_BASELINE, &err), TD_OK);
    expect_same(pod, "base");
    for (p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        for (v = 0; v < sizeof values / sizeof values[0]; v++) {
            char *vt = unquote(values[v]), what[512];
            json_t *copy = json_deep_copy(pod), *val = json_loads(vt, JSON_DECODE_ANY, NULL);
            assert_non_null(val);
            set_path(copy, paths[p], val);
            snprintf(what, sizeof what, "%s = %s", paths[p], values[v]);
            expect_same(copy, what);
            json_decref(copy);
            free(vt);
        }
        {
            /* and the member removed */
            json_t *copy = json_deep_copy(pod);
            char what[512];
            set_path(copy, paths[p], json_null());
            snprintf(what, sizeof what, "%s removed", paths[p]);
            expect_same(copy, what);
            json_decref(copy);
        }
    }
    json_decref(pod);
    free(text);
}


/* Keys with a NUL byte in them ("securityContext\0x") are not the members
 * the checks read, for the walk as for the full checks. */
static void test_fast_nul_keys(void **state)
{
    static const char *const keys[] = {"securityContext", "name", "ports", "livenessProbe",
                                       "lifecycle", "emptyDir", "hostPath", "runAsNonRoot",
                                       "seccompProfile", "capabilities", "allowPrivilegeEscalation"};
    (void)state;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char text[] = "{'spec':{'securityContext':{'runAsNonRoot':true,"
                      "'seccompProfile':{'type':'RuntimeDefault'}},"
                      "'volumes':[{'name':'v','emptyDir':{}}],"
                      "'containers':[{'name':'a','securityContext':{'allowPrivilegeEscalation':"
                      "false,'capabilities':{'drop':['ALL']}}}]}}";
        char *t = unquote(text);
        json_t *pod = json_loads(t, 0, NULL);
        char nk[64];
        size_t n = strlen(keys[i]);
        assert_non_null(pod);
        memcpy(nk, keys[i], n);
        nk[n] = '\0';
        nk[n + 1] = 'x';
        for (size_t t2 = 0; t2 < 4; t2++) {
            json_t *copy = json_deep_copy(pod), *cs, *cc, *cv, *cp, *tg[4];
            json_t *v;
            char what[96];
            cs = json_object_get(copy, "spec");
            cc = json_array_get(json_object_get(cs, "containers"), 0);
            cp = json_object_get(cs, "securityContext");
            cv = json_array_get(json_object_get(cs, "volumes"), 0);
            tg[0] = cc;
            tg[1] = json_object_get(cc, "securityContext");
            tg[2] = cv;
            tg[3] = cp;
            /* the real member moved under the key with a NUL byte */
            v = json_object_get(tg[t2], keys[i]);
            if (v) {
                json_incref(v);
                json_object_del(tg[t2], keys[i]);
            } else {
                v = json_loads("{\"type\":\"Unconfined\",\"host\":\"h\"}", 0, NULL);
            }
            json_object_setn_new(tg[t2], nk, n + 2, v);
            snprintf(what, sizeof what, "%s with a NUL byte in object %zu", keys[i], t2);
            expect_same(copy, what);
            json_decref(copy);
        }
        json_decref(pod);
        free(t);
    }
}

int main(void)
{
    size_t n = sizeof rows / sizeof rows[0], i;
    struct CMUnitTest *tests = calloc(n + 5, sizeof *tests);
    int rc;

    if (!tests)
        return 1;
    for (i = 0; i < n; i++) {
        tests[i].name = rows[i].name;
        tests[i].test_func = test_row;
        tests[i].initial_state = (void *)&rows[i];
    }
    tests[n].name = "td_pss_level_parse";
    tests[n].test_func = test_level_parse;
    tests[n + 1].name = "message longer than td_err";
    tests[n + 1].test_func = test_long_message;
    tests[n + 2].name = "allowed-path walk agrees with the full checks on every row";
    tests[n + 2].test_func = test_fast_rows;
    tests[n + 3].name = "allowed-path walk agrees with the full checks, member by member";
    tests[n + 3].test_func = test_fast_mutations;
    tests[n + 4].name = "keys with a NUL byte are not the members read";
    tests[n + 4].test_func = test_fast_nul_keys;
    rc = _cmocka_run_group_tests("pss", tests, n + 5, NULL, NULL);
    free(tests);
    return rc;
}
