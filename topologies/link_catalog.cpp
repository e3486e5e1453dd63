#include "topologies/link_catalog.hpp"

#include "common/error.hpp"

namespace loom::topo {
namespace {

constexpr double GBps = 1e9;
constexpr double Gbps = 1e9 / 8;
constexpr double us = 1e-6;

// Latencies are per link (hop). They are set so that whole paths match NCCL's hardware
// latencies per step (NVIDIA/nccl v2.18.3-1 src/graph/tuning.cc, hwLat[Ring][LL]): NVLINK
// 0.6 us = GPU->NVSwitch->GPU, 2 x 0.3 us; PCI 1.0 us = GPU->PCIe switch->GPU, 2 x 0.5 us;
// NET 2.7 us = GPU->PCIe->NIC (2 x 0.5) + NIC->leaf->NIC (2 x 0.35) + NIC->PCIe->GPU (2 x 0.5).
constexpr double NVLINK_HOP_S = 0.3 * us;
constexpr double PCIE_HOP_S = 0.5 * us;
constexpr double NET_HOP_S = 0.35 * us;
constexpr const char* NCCL_LAT = "latency: NCCL v2.18.3 tuning.cc hwLat (per-path, split per hop)";

std::vector<LinkSpec> build() {
  return {
      // NVLink3: 12 links x 50 GB/s bidirectional = 600 GB/s per A100, i.e. 25 GB/s per link
      // per direction (NVIDIA A100 Tensor Core GPU Architecture whitepaper, "Third-generation
      // NVLink").
      {"nvlink3", LinkKind::NVLINK, "NVLink3", 25 * GBps, 12, NVLINK_HOP_S,
       std::string("NVIDIA A100 architecture whitepaper: 12 links x 25 GB/s/dir; ") + NCCL_LAT},
      // NVLink4: 18 links, 900 GB/s bidirectional per H100 = 25 GB/s per link per direction
      // (NVIDIA H100 Tensor Core GPU Architecture whitepaper, "Fourth-generation NVLink").
      {"nvlink4", LinkKind::NVLINK, "NVLink4", 25 * GBps, 18, NVLINK_HOP_S,
       std::string("NVIDIA H100 architecture whitepaper: 18 links x 25 GB/s/dir; ") + NCCL_LAT},
      // NVLink5: 18 links, 1.8 TB/s bidirectional per Blackwell GPU = 50 GB/s per link per
      // direction (NVIDIA GB200 NVL72 / Blackwell datasheet).
      {"nvlink5", LinkKind::NVLINK, "NVLink5", 50 * GBps, 18, NVLINK_HOP_S,
       std::string("NVIDIA Blackwell datasheet: 18 links x 50 GB/s/dir; ") + NCCL_LAT},
      // NVLink-C2C between Grace and a Blackwell/Hopper GPU: 900 GB/s bidirectional
      // (NVIDIA Grace Hopper / GB200 superchip datasheets).
      {"nvlink-c2c", LinkKind::NVLINK, "NVLink-C2C", 450 * GBps, 1, NVLINK_HOP_S,
       std::string("NVIDIA GB200 datasheet: NVLink-C2C 900 GB/s bidirectional; ") + NCCL_LAT},
      // PCIe per lane per direction after 128b/130b encoding: Gen3 8 GT/s = 0.985 GB/s, Gen4
      // 16 GT/s = 1.969 GB/s, Gen5 32 GT/s = 3.938 GB/s (PCI-SIG base specifications 3.0, 4.0,
      // 5.0); x16 = 15.75 / 31.5 / 63.0 GB/s.
      {"pcie3", LinkKind::PCIE, "PCIe Gen3", 0.985 * GBps, 16, PCIE_HOP_S,
       std::string("PCI-SIG PCIe 3.0: 8 GT/s, 128b/130b; ") + NCCL_LAT},
      {"pcie4", LinkKind::PCIE, "PCIe Gen4", 1.969 * GBps, 16, PCIE_HOP_S,
       std::string("PCI-SIG PCIe 4.0: 16 GT/s, 128b/130b; ") + NCCL_LAT},
      {"pcie5", LinkKind::PCIE, "PCIe Gen5", 3.938 * GBps, 16, PCIE_HOP_S,
       std::string("PCI-SIG PCIe 5.0: 32 GT/s, 128b/130b; ") + NCCL_LAT},
      // Gen6 64 GT/s PAM4 in 256-byte FLITs carrying 236 bytes of TLPs: 8 x 236/256 = 7.375
      // GB/s per lane, x16 = 118 GB/s (PCI-SIG PCIe 6.0 base specification, FLIT mode).
      {"pcie6", LinkKind::PCIE, "PCIe Gen6", 7.375 * GBps, 16, PCIE_HOP_S,
       std::string("PCI-SIG PCIe 6.0: 64 GT/s PAM4, 256-byte FLIT with 236 TLP bytes; ") +
           NCCL_LAT},
      // Socket-to-socket: Intel UPI 2.0 (Sapphire Rapids, DGX H100) runs 4 links at 16 GT/s,
      // about 32 GB/s per link per direction (Intel Xeon Scalable 4th gen product brief);
      // AMD xGMI (EPYC, DGX A100) is of the same order. Four links aggregated. The latency is
      // an assumption (a PCIe-like hop), not a measured figure.
      {"cpu-link", LinkKind::CPU_INTERCONNECT, "UPI/xGMI", 32 * GBps, 4, PCIE_HOP_S,
       "Intel 4th-gen Xeon Scalable brief: UPI 2.0 16 GT/s, 4 links (approximate); latency "
       "assumed"},
      // InfiniBand per port: HDR 200 Gb/s (ConnectX-6), NDR 400 Gb/s (ConnectX-7), XDR
      // 800 Gb/s (ConnectX-8) (NVIDIA ConnectX-6/7/8 product briefs).
      {"ib-hdr", LinkKind::INFINIBAND, "InfiniBand HDR", 200 * Gbps, 1, NET_HOP_S,
       std::string("NVIDIA ConnectX-6 VPI brief: HDR 200 Gb/s; ") + NCCL_LAT},
      {"ib-ndr", LinkKind::INFINIBAND, "InfiniBand NDR", 400 * Gbps, 1, NET_HOP_S,
       std::string("NVIDIA ConnectX-7 brief: NDR 400 Gb/s; ") + NCCL_LAT},
      {"ib-xdr", LinkKind::INFINIBAND, "InfiniBand XDR", 800 * Gbps, 1, NET_HOP_S,
       std::string("NVIDIA ConnectX-8 SuperNIC brief: XDR 800 Gb/s; ") + NCCL_LAT},
      // RoCE (Ethernet) per port; latency assumed a little above InfiniBand's (0.5 us/hop).
      {"roce-100g", LinkKind::ROCE, "RoCE 100G", 100 * Gbps, 1, 0.5 * us,
       "IEEE 802.3 100GbE; latency assumed"},
      {"roce-200g", LinkKind::ROCE, "RoCE 200G", 200 * Gbps, 1, 0.5 * us,
       "IEEE 802.3 200GbE; latency assumed"},
      {"roce-400g", LinkKind::ROCE, "RoCE 400G", 400 * Gbps, 1, 0.5 * us,
       "IEEE 802.3 400GbE; latency assumed"},
  };
}

}  // namespace

const std::vector<LinkSpec>& link_catalog() {
  static const std::vector<LinkSpec> catalog = build();
  return catalog;
}

std::vector<std::string> link_type_names() {
  std::vector<std::string> names;
  for (const auto& l : link_catalog()) names.push_back(l.name);
  return names;
}

const LinkSpec& find_link_type(std::string_view name, std::string_view field) {
  for (const auto& l : link_catalog())
    if (l.name == name) return l;
  throw ValidationError::unknown_name(field, name, link_type_names());
}

}  // namespace loom::topo
