package operator

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServerCIDRs are the API server's addresses, from the kubernetes Service's
// EndpointSlice in the default namespace (the addresses its instances advertise), each as
// a /32 or /128: where its proxy connects to pods from on most clusters. A cluster whose
// control plane connects from elsewhere (a managed one, say) needs --api-server-cidr.
// None when they cannot be read: the NetworkPolicies then admit no API server.
func apiServerCIDRs(cfg *rest.Config, logger *slog.Logger) []string {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		logger.Warn("cannot read the API server's addresses for the NetworkPolicies", "error", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slice, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		logger.Warn("cannot read the API server's addresses (EndpointSlice default/kubernetes): the NetworkPolicies admit no API server proxy "+
			"to the workers' progress port and TensorBoard; give --api-server-cidr", "error", err)
		return nil
	}
	cidrs := endpointCIDRs(slice)
	logger.Info("the API server's addresses, admitted by the NetworkPolicies", "cidrs", cidrs)
	return cidrs
}

// endpointCIDRs are the addresses of an EndpointSlice's endpoints as single-address CIDRs.
func endpointCIDRs(slice *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, e := range slice.Endpoints {
		for _, a := range e.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				continue
			}
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()).String())
		}
	}
	return out
}
