# PyTorch's DCGAN tutorial at a small size: a generator of ConvTranspose2d, BatchNorm2d and ReLU ending in Tanh, a
# discriminator of Conv2d and LeakyReLU(inplace=True) ending in Sigmoid, BCELoss, Adam with betas, the tutorial's
# weights_init (its normal draws replaced by a fixed NumPy generator) and its training step, on 8x8 "images".
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

rng = np.random.default_rng(7)
nz, ngf, ndf, batch = 8, 16, 16, 16


def fixed_normal(shape, mean, std):
    return torch.tensor((rng.standard_normal(shape) * std + mean).astype(np.float32))


def weights_init(m):
    classname = m.__class__.__name__
    with torch.no_grad():
        if classname.find("Conv") != -1:
            m.weight.copy_(fixed_normal(tuple(m.weight.shape), 0.0, 0.02 * 10))
        elif classname.find("BatchNorm") != -1:
            m.weight.copy_(fixed_normal(tuple(m.weight.shape), 1.0, 0.02))
            nn.init.constant_(m.bias.data, 0)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input)


netG, netD = Generator(), Discriminator()
netG.apply(weights_init)
netD.apply(weights_init)
print(netG.main[0].weight.shape, netD.main[2].weight.shape)
criterion = nn.BCELoss()
fixed_noise = fixed_normal((batch, nz, 1, 1), 0.0, 1.0)
real = torch.tanh(fixed_normal((batch, 1, 8, 8), 0.0, 1.0))
real_label, fake_label = 1.0, 0.0
optimizerD = optim.Adam(netD.parameters(), lr=0.0002 * 10, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=0.0002 * 10, betas=(0.5, 0.999))
for i in range(5):
    netD.zero_grad()
    label = torch.full((batch,), real_label, dtype=torch.float)
    output = netD(real).view(-1)
    errD_real = criterion(output, label)
    errD_real.backward()
    D_x = output.mean().item()
    noise = fixed_normal((batch, nz, 1, 1), 0.0, 1.0)
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake.detach()).view(-1)
    errD_fake = criterion(output, label)
    errD_fake.backward()
    D_G_z1 = output.mean().item()
    errD = errD_real + errD_fake
    optimizerD.step()
    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake).view(-1)
    errG = criterion(output, label)
    errG.backward()
    D_G_z2 = output.mean().item()
    optimizerG.step()
    print(f"[{i}/5]\tLoss_D: {errD.item():.4f}\tLoss_G: {errG.item():.4f}\tD(x): {D_x:.4f}\t"
          f"D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}")
with torch.no_grad():
    fake = netG(fixed_noise).detach().cpu()
print(tuple(fake.shape), f"{fake.mean().item():.4f}", f"{fake.std().item():.4f}")
